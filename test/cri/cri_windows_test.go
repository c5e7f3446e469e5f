//go:build windows

package cri

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/testenv"
)

// The node's facts (test/winnode): its pod network and the images its registry holds.
const (
	podSubnet  = "10.250.0.0/24"
	testImage  = "docker.io/runhcs/test:latest" // any registry name reaches the node's registry
	workload   = `C:\workload\workload.exe`
	rpcTimeout = 2 * time.Minute // generous: a shared 2-core machine, Wine underneath
)

type node struct {
	rt  internalapi.RuntimeService
	img internalapi.ImageManagerService
}

func connect(t testing.TB) *node {
	t.Helper()
	pipe := os.Getenv("RUNHCS_NODE_PIPE")
	if pipe == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_NODE_PIPE is not set: run the suite inside the node (make test-winnode)")
		}
		t.Skip("no node: run through hack/winnode.sh run (make test-winnode)")
	}
	// \\.\pipe\NAME is npipe://./pipe/NAME to kubelet's client.
	endpoint := "npipe://" + strings.ReplaceAll(strings.TrimPrefix(pipe, `\\`), `\`, "/")
	ctx := context.Background()
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(rpcTimeout).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(rpcTimeout).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &node{rt: rt, img: img}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	t.Cleanup(cancel)
	return c
}

// podConfig is a pod as a Windows kubelet sends it.
func podConfig(t testing.TB, name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: name + "-uid", Namespace: "winnode"},
		Hostname:     name,
		LogDirectory: t.TempDir(),
		Labels:       map[string]string{"suite": "cri"},
		Windows:      &runtimeapi.WindowsPodSandboxConfig{SecurityContext: &runtimeapi.WindowsSandboxSecurityContext{}},
	}
}

// TestVersion: CRI's Version answers containerd, CRI v1 and the release the node runs, which
// is one of the two pins (2.4.x, 1.7.x) and the one containerd's own API reported when the node
// came up (RUNHCS_NODE_CONTAINERD, from `ctr version`).
func TestVersion(t *testing.T) {
	n := connect(t)
	v, err := n.rt.Version(ctx(t), "v1")
	if err != nil {
		t.Fatal(err)
	}
	want := os.Getenv("RUNHCS_NODE_CONTAINERD")
	if v.RuntimeName != "containerd" || v.RuntimeApiVersion != "v1" || v.RuntimeVersion != want ||
		!(strings.HasPrefix(want, "v2.4.") || strings.HasPrefix(want, "v1.7.")) {
		t.Fatalf("Version: %+v; want containerd %q (v2.4.x or v1.7.x), CRI v1", v, want)
	}
}

// containerd17 tells whether the node runs containerd 1.7, from CRI's Version call. It is for
// the few checks where containerd 1.7 itself behaves differently from 2.x: branch on it with a
// comment citing 1.7's behaviour (its source, v1.7.35's pkg/cri/...), and keep the 2.x check as
// it is, never loosened for both.
func containerd17(t testing.TB, n *node) bool {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	v, err := n.rt.Version(c, "v1")
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	return strings.HasPrefix(v.RuntimeVersion, "v1.7.")
}

// runPod runs a pod with the default handler and removes it at the end of the test.
func runPod(t *testing.T, n *node, name string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	return runPodWith(t, n, name, "")
}

// runPodWith is runPod with the runtime handler handler ("" for the default).
func runPodWith(t *testing.T, n *node, name, handler string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := podConfig(t, name)
	return runPodConfig(t, n, cfg, handler), cfg
}

// runPodConfig runs the pod cfg with the runtime handler handler ("" for the default) and
// returns its id; the pod is stopped and removed when the test ends.
func runPodConfig(t *testing.T, n *node, cfg *runtimeapi.PodSandboxConfig, handler string) string {
	t.Helper()
	id, err := n.rt.RunPodSandbox(ctx(t), cfg, handler)
	if err != nil {
		t.Fatalf("RunPodSandbox (handler %q): %v", handler, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, id)
		n.rt.RemovePodSandbox(c, id)
	})
	return id
}

// TestPodSandbox runs a process-isolated pod with the default handler (runhcs-wcow-process),
// reads its status and IP, stops and removes it, and looks for anything left on the emulated
// host: compute systems and HNS endpoints.
func TestPodSandbox(t *testing.T) {
	n := connect(t)
	// The earlier tests' pods are gone: no shim runs, and what is mounted now is the baseline.
	waitNoShim(t)
	mounts := nodeMounts(t)
	id, _ := runPod(t, n, "pod-sandbox")
	if got := countShims(t); got != 1 {
		t.Fatalf("%d shim processes for one pod: %v", got, processes(t))
	}
	for _, dir := range podStateFolders(t, id) {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the pod's state folder: %v", err)
		}
	}
	t.Logf("mounts under the node's root: %d before the pod, %d while it runs", mounts, nodeMounts(t))
	st, err := n.rt.PodSandboxStatus(ctx(t), id, false)
	if err != nil {
		t.Fatal(err)
	}
	s := st.GetStatus()
	if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("pod state %v, want SANDBOX_READY", s.GetState())
	}
	ip, err := netip.ParseAddr(s.GetNetwork().GetIp())
	if err != nil || !netip.MustParsePrefix(podSubnet).Contains(ip) {
		t.Fatalf("pod IP %q (%v): want one in %s", s.GetNetwork().GetIp(), err, podSubnet)
	}
	// With a pause container the pod has a compute system of its id. Under the shim sandboxer a
	// process-isolated pod's sandbox runs no container (docs/sandbox-api.md): the shim holds the
	// pod and its HNS namespace, so no compute system has the pod's id.
	systems := computeSystems(t)
	if shimSandboxer(t) {
		if containsPrefix(systems, id) {
			t.Fatalf("compute systems %v: want none for the shim sandboxer's pod %s (no pause container)", systems, id)
		}
	} else if !containsPrefix(systems, id) {
		t.Fatalf("compute systems %v: want the pod's pause container %s", systems, id)
	}
	if err := n.rt.StopPodSandbox(ctx(t), id); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	st, err = n.rt.PodSandboxStatus(ctx(t), id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("after stop: %v, %v; want SANDBOX_NOTREADY", st.GetStatus().GetState(), err)
	}
	if _, err := removePodSandbox(ctx(t), n.rt, id); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	pods, err := n.rt.ListPodSandbox(ctx(t), &runtimeapi.PodSandboxFilter{Id: id})
	if err != nil || len(pods) != 0 {
		t.Fatalf("ListPodSandbox after remove: %v, %v; want none", pods, err)
	}
	if systems := computeSystems(t); containsPrefix(systems, id) {
		t.Fatalf("compute systems after remove: %v", systems)
	}
	if eps := endpoints(t); len(eps) != 0 {
		t.Fatalf("HNS endpoints after remove: %v", eps)
	}
	for _, dir := range podStateFolders(t, id) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the pod's state folder %s after remove: %v; want it gone", dir, err)
		}
	}
	if got := nodeMounts(t); got != mounts {
		t.Errorf("mounts under the node's root after remove: %d, want %d as before the pod", got, mounts)
	}
	waitNoShim(t)
}

func TestPullImage(t *testing.T) {
	n := connect(t)
	for _, ref := range []string{testImage, os.Getenv("RUNHCS_NODE_REGISTRY") + "/runhcs/test:latest"} {
		got, err := n.img.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: ref}, nil, nil)
		if err != nil {
			t.Fatalf("PullImage %s: %v", ref, err)
		}
		st, err := n.img.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil || st.GetImage() == nil || st.GetImage().GetId() != got {
			t.Fatalf("ImageStatus %s: %+v, %v; want image %s", ref, st.GetImage(), err, got)
		}
	}
}

// computeSystems lists the ids of the emulated host's compute systems (HCS, through the
// stand-in computecore.dll).
func computeSystems(t *testing.T) []string {
	t.Helper()
	list, err := hcs.NewHostClient().EnumerateComputeSystems(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range list {
		ids = append(ids, p.Id)
	}
	return ids
}

func containsPrefix(ids []string, prefix string) bool {
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	return false
}

// endpoints lists the names of the host's HNS endpoints.
func endpoints(t *testing.T) []string {
	t.Helper()
	api, err := hns.DefaultAPI()
	if err != nil {
		t.Fatal(err)
	}
	eps, err := hns.NewClient(api).ListEndpoints(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range eps {
		names = append(names, e.Name)
	}
	return names
}

// containerConfig is an app container of the test image running the workload with args.
func containerConfig(name string, args ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: testImage},
		Command:  append([]string{workload}, args...),
		LogPath:  name + ".log",
		Windows: &runtimeapi.WindowsContainerConfig{
			Resources:       &runtimeapi.WindowsContainerResources{},
			SecurityContext: &runtimeapi.WindowsContainerSecurityContext{},
		},
	}
}

// startContainer pulls the test image, creates and starts a container in the pod and removes
// it at the end of the test.
func startContainer(t *testing.T, n *node, pod string, podCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	if _, err := n.img.PullImage(ctx(t), cfg.Image, nil, podCfg); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	id, err := n.rt.CreateContainer(ctx(t), pod, cfg, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.RemoveContainer(c, id)
	})
	if err := n.rt.StartContainer(ctx(t), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

// waitExited polls ContainerStatus until the container has exited (no event API in CRI; the
// deadline is generous).
func waitExited(t *testing.T, n *node, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(rpcTimeout)
	for {
		st, err := n.rt.ContainerStatus(ctx(t), id, false)
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		if s := st.GetStatus(); s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s has not exited after %s: %+v", id, rpcTimeout, st.GetStatus())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestContainerExitCode runs a container to its end: ContainerStatus has its exit code and the
// CRI log file containerd writes has its stdout line; RemoveContainer removes it.
func TestContainerExitCode(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-exit")
	cfg := containerConfig("exits", "echo", "hello from the node")
	id := startContainer(t, n, pod, podCfg, cfg)
	s := waitExited(t, n, id)
	if s.GetExitCode() != 0 || s.GetReason() != "Completed" {
		t.Fatalf("exit code %d, reason %q; want 0, Completed", s.GetExitCode(), s.GetReason())
	}
	log, err := os.ReadFile(filepath.Join(podCfg.LogDirectory, cfg.LogPath))
	if err != nil {
		t.Fatal(err)
	}
	// CRI's log format: RFC3339Nano, the stream, F (a full line), the line.
	if !strings.Contains(string(log), " stdout F hello from the node") {
		t.Fatalf("CRI log %q: want the stdout line", log)
	}

	failing := startContainer(t, n, pod, podCfg, containerConfig("fails", "exit", "3"))
	if s := waitExited(t, n, failing); s.GetExitCode() != 3 || s.GetReason() != "Error" {
		t.Fatalf("exit code %d, reason %q; want 3, Error", s.GetExitCode(), s.GetReason())
	}
	if err := n.rt.RemoveContainer(ctx(t), id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if list, err := n.rt.ListContainers(ctx(t), &runtimeapi.ContainerFilter{Id: id}); err != nil || len(list) != 0 {
		t.Fatalf("ListContainers after remove: %v, %v; want none", list, err)
	}
}

// TestExecSync runs commands in a running container: output, exit code, timeout.
func TestExecSync(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-exec")
	id := startContainer(t, n, pod, podCfg, containerConfig("sleeps", "sleep", "600"))
	stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "echo", "exec output"}, time.Minute)
	if err != nil || string(stdout) != "exec output\n" || len(stderr) != 0 {
		t.Fatalf("ExecSync echo: stdout %q, stderr %q, %v; want %q", stdout, stderr, err, "exec output\n")
	}
	stdout, stderr, err = n.rt.ExecSync(ctx(t), id, []string{workload, "stderr", "to stderr"}, time.Minute)
	if err != nil || string(stderr) != "to stderr\n" || len(stdout) != 0 {
		t.Fatalf("ExecSync stderr: stdout %q, stderr %q, %v", stdout, stderr, err)
	}
	_, _, err = n.rt.ExecSync(ctx(t), id, []string{workload, "exit", "7"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 7 {
		t.Fatalf("ExecSync exit 7: %v; want exit status 7", err)
	}
	// A command that outlives its timeout is killed and the call fails (containerd answers
	// DeadlineExceeded, which kubelet's client reports as ErrCommandTimedOut); the container
	// stays up.
	start := time.Now()
	_, _, err = n.rt.ExecSync(ctx(t), id, []string{workload, "sleep", "600"}, 2*time.Second)
	if !errors.Is(err, remote.ErrCommandTimedOut) {
		t.Fatalf("ExecSync past its timeout: %v (after %s); want ErrCommandTimedOut", err, time.Since(start))
	}
	if st, err := n.rt.ContainerStatus(ctx(t), id, false); err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after a timed-out exec: %v, %v; want running", st.GetStatus().GetState(), err)
	}
}

// waitLog polls the container's CRI log file until it holds want.
func waitLog(t *testing.T, path, want string) {
	t.Helper()
	waitFor(t, path, func(log string) bool { return strings.Contains(log, want) }, want)
}

// waitFor polls the container's CRI log file until done says it holds what is awaited (what,
// for the failure message).
func waitFor(t *testing.T, path string, done func(log string) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(rpcTimeout)
	for {
		b, _ := os.ReadFile(path)
		if done(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRI log %s: no %q after %s; it holds %q", path, what, rpcTimeout, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStopContainer stops containers as kubelet does: SIGTERM (a CTRL_SHUTDOWN_EVENT to the
// Windows process), then a kill when the grace period ends.
func TestStopContainer(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-stop")
	graceful := containerConfig("graceful", "wait-signal", "5")
	id := startContainer(t, n, pod, podCfg, graceful)
	logPath := filepath.Join(podCfg.LogDirectory, graceful.LogPath)
	waitLog(t, logPath, " stdout F waiting")
	if err := n.rt.StopContainer(ctx(t), id, 60); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if s := waitExited(t, n, id); s.GetExitCode() != 5 {
		t.Fatalf("stopped container: exit code %d, want 5 (its own, after the stop signal)", s.GetExitCode())
	}
	waitLog(t, logPath, " stdout F got SIGTERM")

	stubborn := containerConfig("stubborn", "ignore-signals")
	id = startContainer(t, n, pod, podCfg, stubborn)
	waitLog(t, filepath.Join(podCfg.LogDirectory, stubborn.LogPath), " stdout F ignoring")
	if err := n.rt.StopContainer(ctx(t), id, 2); err != nil {
		t.Fatalf("StopContainer with a 2 s grace period: %v", err)
	}
	if s := waitExited(t, n, id); s.GetExitCode() == 0 {
		t.Fatalf("killed container: exit code 0, want a failure")
	}
}

// TestImages lists, inspects and removes an image and reads the image filesystem's usage.
func TestImages(t *testing.T) {
	n := connect(t)
	ref := os.Getenv("RUNHCS_NODE_REGISTRY") + "/pause:3.10.2"
	id, err := n.img.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: ref}, nil, nil)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	// containerd's CRI answers every image whatever the filter (critest filters too).
	list, err := n.img.ListImages(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var found *runtimeapi.Image
	for _, img := range list {
		if img.GetId() == id {
			found = img
		}
	}
	if found == nil || !contains(found.GetRepoTags(), ref) || found.GetSize() == 0 {
		t.Fatalf("ListImages: %v; want %s tagged %s with its size", list, id, ref)
	}
	fs, err := n.img.ImageFsInfo(ctx(t))
	if err != nil || len(fs.GetImageFilesystems()) == 0 || fs.GetImageFilesystems()[0].GetUsedBytes() == nil {
		t.Fatalf("ImageFsInfo: %v, %v; want the image filesystem with its usage", fs, err)
	}
	if err := n.img.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: ref}); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	if st, err := n.img.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.GetImage() != nil {
		t.Fatalf("ImageStatus after remove: %v, %v; want no image", st.GetImage(), err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// podIP is the pod's IP from PodSandboxStatus.
func podIP(t *testing.T, n *node, pod string) string {
	t.Helper()
	st, err := n.rt.PodSandboxStatus(ctx(t), pod, false)
	if err != nil {
		t.Fatal(err)
	}
	return st.GetStatus().GetNetwork().GetIp()
}

// TestPodNetworking: two app containers of one pod share localhost; a container of another pod
// reaches the first pod at its IP; the node's host (where this test runs, as kubelet's probes
// do) reaches it too.
func TestPodNetworking(t *testing.T) {
	n := connect(t)
	podA, cfgA := runPod(t, n, "pod-net-a")
	server := containerConfig("server", "listen", "0.0.0.0:8080")
	serverID := startContainer(t, n, podA, cfgA, server)
	waitLog(t, filepath.Join(cfgA.LogDirectory, server.LogPath), " stdout F listening")

	local := containerConfig("local-client", "connect", "127.0.0.1:8080", "same-pod")
	id := startContainer(t, n, podA, cfgA, local)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("connect over the pod's localhost: exit code %d", s.GetExitCode())
	}
	waitLog(t, filepath.Join(cfgA.LogDirectory, local.LogPath), " stdout F echo: same-pod")

	ipA := podIP(t, n, podA)
	podB, cfgB := runPod(t, n, "pod-net-b")
	if ipB := podIP(t, n, podB); ipB == ipA {
		t.Fatalf("both pods have IP %s", ipA)
	}
	remote := containerConfig("remote-client", "connect", ipA+":8080", "other-pod")
	id = startContainer(t, n, podB, cfgB, remote)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("connect from another pod to %s: exit code %d", ipA, s.GetExitCode())
	}
	waitLog(t, filepath.Join(cfgB.LogDirectory, remote.LogPath), " stdout F echo: other-pod")

	c, err := net.DialTimeout("tcp", ipA+":8080", time.Minute)
	if err != nil {
		t.Fatalf("from the node's host to the pod: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte("from-host\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "echo: from-host\n" {
		t.Fatalf("answer %q, %v; want %q", line, err, "echo: from-host\n")
	}

	// The server has run and answered: CRI's container stats (decoded from the shim's
	// Windows statistics) show CPU time and a working set.
	st, err := n.rt.ContainerStats(ctx(t), serverID)
	if err != nil {
		t.Fatalf("ContainerStats: %v", err)
	}
	if st.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 || st.GetMemory().GetWorkingSetBytes().GetValue() == 0 {
		t.Fatalf("ContainerStats: %v; want CPU time and a working set", st)
	}
}
