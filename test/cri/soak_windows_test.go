//go:build windows

package cri

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/hns"
)

// The soak of the shim sandboxer runs only when asked (`hack/winnode.sh soak`, which `make soak`
// runs): it needs a node with --sandboxer shim and `winnode run --shim-kills` around this
// binary, which the CRI suite's runs do not have.
var (
	soak       = flag.Bool("soak", false, "run TestSandboxSoak (hack/winnode.sh soak: a --sandboxer shim node, winnode run --shim-kills)")
	soakPods   = flag.Int("soak.pods", 30, "TestSandboxSoak: pods churned")
	soakKills  = flag.Int("soak.kills", 8, "TestSandboxSoak: pods whose shim is SIGKILLed, spread over the kill points")
	soakHVKill = flag.Int("soak.hyperv-kills", 4, "TestSandboxSoak: Hyper-V pods whose shim is SIGKILLed, spread over the kill points")
	soakAtOnce = flag.Int("soak.parallel", 3, "TestSandboxSoak: pods churned at a time")
)

// TestSandboxSoak is the soak of containerd's sandbox API served by the shim (issue 25,
// docs/sandbox-api.md): pods run and removed in a loop through the shim sandboxer, and pods
// whose shim is SIGKILLed at a point of its life, after which CRI must stop and remove the pod
// and leave nothing on the emulated host: no compute system, no HNS endpoint or namespace, no
// mount under the node's folder, no shim process, no bundle folder of the pod or its container.
// The kills come first, so the churn after them also shows the node still runs pods.
func TestSandboxSoak(t *testing.T) {
	if !*soak {
		t.Skip("the shim sandboxer's soak: run by hack/winnode.sh soak (make soak) with -soak")
	}
	if !shimSandboxer(t) {
		t.Fatal("-soak: the node runs pods with a pause container; the soak wants hack/winnode.sh up --sandboxer shim")
	}
	n := connect(t)
	if _, err := n.img.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: testImage}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if *soakHVKill > 0 {
		// The node's first utility VM makes hcsemu's shared mount of its VMs folder, which
		// stays while the daemon runs (internal/hcsemu/layout VMsDir), and the CRI's first
		// Hyper-V pod pulls the pause image: one Hyper-V pod first, so the baseline has both.
		warm := runPodConfig(t, n, podConfig(t, "soak-hyperv-warm-up"), hypervHandler)
		if err := n.rt.StopPodSandbox(ctx(t), warm); err != nil {
			t.Fatalf("StopPodSandbox: %v", err)
		}
		if _, err := removePodSandbox(ctx(t), n.rt, warm); err != nil {
			t.Fatalf("RemovePodSandbox: %v", err)
		}
	}
	waitNoShim(t)
	base := baseline(t)
	t.Logf("baseline: %d mounts under the node's root, HNS namespaces %v", base.mounts, base.namespaces)
	points := []string{"ready", "running", "exited", "stopped"}
	t.Run("kills", func(t *testing.T) {
		for i := range *soakKills {
			point := points[i%len(points)]
			start := time.Now()
			pod, ctr := soakKill(t, n, fmt.Sprintf("soak-kill-%d", i), point, "")
			base.check(t, pod, ctr)
			t.Logf("kill %d (%s): pod %s cleaned up in %s", i, point, pod, time.Since(start).Round(time.Millisecond))
		}
	})
	// Hyper-V pods through the sandbox API: the delete action of the dead shim ends the pod's
	// VM and removes its boot image's view and lease (docs/sandbox-api.md, Hyper-V pods).
	t.Run("kills-hyperv", func(t *testing.T) {
		for i := range *soakHVKill {
			point := points[i%len(points)]
			start := time.Now()
			pod, ctr := soakKill(t, n, fmt.Sprintf("soak-kill-hv-%d", i), point, hypervHandler)
			base.check(t, pod, ctr)
			t.Logf("Hyper-V kill %d (%s): pod %s cleaned up in %s", i, point, pod, time.Since(start).Round(time.Millisecond))
		}
	})
	t.Run("churn", func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var ids [][2]string
		var wg sync.WaitGroup
		next := make(chan int)
		for range *soakAtOnce {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					pod, ctr, err := churnPod(n, i)
					mu.Lock()
					ids = append(ids, [2]string{pod, ctr})
					mu.Unlock()
					if err != nil {
						t.Errorf("churn pod %d: %v", i, err)
					}
				}
			}()
		}
		for i := 0; i < *soakPods && !t.Failed(); i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		t.Logf("churn: %d pods, %d at a time, in %s", len(ids), *soakAtOnce, time.Since(start).Round(time.Millisecond))
		for _, id := range ids {
			base.check(t, id[0], id[1])
		}
	})
}

// soakBaseline is what the node holds with no pod: the mounts under its folder and its HNS
// namespaces (none on a fresh node; taken rather than assumed).
type soakBaseline struct {
	mounts     int
	namespaces []string
}

func baseline(t *testing.T) soakBaseline {
	return soakBaseline{mounts: nodeMounts(t), namespaces: namespaces(t)}
}

// check fails t if anything of the removed pod (and its container ctr, "" for none) is left on
// the node, or anything beyond the baseline: the soak runs alone on its node, so no compute
// system, HNS endpoint or shim process may remain at all.
func (b soakBaseline) check(t *testing.T, pod, ctr string) {
	t.Helper()
	if pods, err := connect(t).rt.ListPodSandbox(ctx(t), &runtimeapi.PodSandboxFilter{Id: pod}); err != nil || len(pods) != 0 {
		t.Errorf("pod %s: ListPodSandbox after remove: %v, %v; want none", pod, pods, err)
	}
	if systems := computeSystems(t); len(systems) != 0 {
		t.Errorf("pod %s: compute systems left: %v", pod, systems)
	}
	if eps := endpoints(t); len(eps) != 0 {
		t.Errorf("pod %s: HNS endpoints left: %v", pod, eps)
	}
	if lease, view := bootObjects(t, pod); lease || view {
		t.Errorf("pod %s: boot image lease %v, view %v left; want neither", pod, lease, view)
	}
	if ns := namespaces(t); !slices.Equal(ns, b.namespaces) {
		t.Errorf("pod %s: HNS namespaces %v, want %v as with no pod", pod, ns, b.namespaces)
	}
	dirs := podStateFolders(t, pod)
	if ctr != "" {
		dirs = append(dirs, nodePath(t, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", ctr))
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("pod %s: folder %s after remove: %v; want it gone", pod, dir, err)
		}
	}
	waitNoShim(t)
	if got := nodeMounts(t); got != b.mounts {
		t.Errorf("pod %s: %d mounts under the node's root, want %d as with no pod", pod, got, b.mounts)
	}
}

// namespaces lists the ids of the host's HNS namespaces, sorted.
func namespaces(t *testing.T) []string {
	t.Helper()
	api, err := hns.DefaultAPI()
	if err != nil {
		t.Fatal(err)
	}
	list, err := hns.NewClient(api).ListNamespaces(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ns := range list {
		ids = append(ids, ns.Id)
	}
	slices.Sort(ids)
	return ids
}

// soakKill runs a pod to point ("ready": the sandbox alone; "running": a container that answered
// an exec; "exited": a container that ran to its end; "stopped": a running container, then
// StopPodSandbox, so that the shim waits for ShutdownSandbox) with handler ("" for the default),
// has its shim SIGKILLed, then stops and removes the pod as kubelet would. It returns the pod's
// and the container's ids.
func soakKill(t *testing.T, n *node, name, point, handler string) (pod, ctr string) {
	t.Helper()
	cfg := podConfig(t, name)
	pod = runPodConfig(t, n, cfg, handler)
	switch point {
	case "ready":
	case "running", "stopped":
		cc := containerConfig("sleeps", "sleep", "600")
		ctr = createStart(t, n, pod, cfg, cc)
		out, _, err := n.rt.ExecSync(ctx(t), ctr, []string{workload, "echo", "exec"}, time.Minute)
		if err != nil || string(out) != "exec\n" {
			t.Fatalf("ExecSync: %q, %v", out, err)
		}
		if point == "stopped" {
			if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
				t.Fatalf("StopPodSandbox: %v", err)
			}
		}
	case "exited":
		cc := containerConfig("exits", "echo", "done")
		ctr = createStart(t, n, pod, cfg, cc)
		if s := waitExited(t, n, ctr); s.GetExitCode() != 0 {
			t.Fatalf("container exit code %d, want 0", s.GetExitCode())
		}
	default:
		t.Fatalf("kill point %q", point)
	}
	if got := countShims(t); got != 1 {
		t.Fatalf("%d shim processes for one pod: %v", got, processes(t))
	}
	t.Logf("%s: %s", name, killShim(t, pod))
	// containerd runs the shim's delete action for the dead shim (a shim process too, briefly).
	waitNoShim(t)
	// kubelet learns that the pod is dead from PodSandboxStatus: NOTREADY, once containerd has
	// handled the shim's end, makes it stop the pod and run a new one.
	waitNotReady(t, n, pod)
	if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
		t.Fatalf("StopPodSandbox after the shim's SIGKILL: %v", err)
	}
	retries, err := removePodSandbox(ctx(t), n.rt, pod)
	if err != nil {
		t.Fatalf("RemovePodSandbox after the shim's SIGKILL: %v", err)
	}
	if retries > 0 {
		t.Logf("%s: RemovePodSandbox retried %d times (%q)", name, retries, stillRunning)
	}
	return pod, ctr
}

// waitNotReady waits for CRI to report the pod NOTREADY, as kubelet polls PodSandboxStatus.
func waitNotReady(t *testing.T, n *node, pod string) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < rpcTimeout {
		st, err := n.rt.PodSandboxStatus(ctx(t), pod, false)
		if err == nil && st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Logf("pod %s NOTREADY %s after its shim's end (before: %s)", pod, time.Since(start).Round(time.Millisecond), last)
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = st.GetStatus().GetState().String()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s: PodSandboxStatus %s after its shim's SIGKILL: %s; want SANDBOX_NOTREADY", pod, rpcTimeout, last)
}

// createStart creates and starts a container in the pod; the pod's removal removes it.
func createStart(t *testing.T, n *node, pod string, podCfg *runtimeapi.PodSandboxConfig, cc *runtimeapi.ContainerConfig) string {
	t.Helper()
	id, err := n.rt.CreateContainer(ctx(t), pod, cc, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := n.rt.StartContainer(ctx(t), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id
}

// killShim asks `winnode run --shim-kills`, which runs this binary, to SIGKILL the pod's shim
// (test/winnode shimkill_linux.go) and waits for its answer.
func killShim(t *testing.T, pod string) string {
	t.Helper()
	dir := nodePath(t, "shim-kills")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("no shim killer (%v): run this binary with winnode run --shim-kills (hack/winnode.sh soak)", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, pod+".req"), []byte(pod+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(rpcTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(dir, pod+".done"))
		if err == nil {
			answer := strings.TrimSpace(string(b))
			if !strings.HasPrefix(answer, "killed ") {
				t.Fatalf("SIGKILL of pod %s's shim: %s", pod, answer)
			}
			return answer
		}
		if time.Now().After(deadline) {
			t.Fatalf("SIGKILL of pod %s's shim: no answer after %s", pod, rpcTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// churnPod runs one pod of the churn through the shim sandboxer: a container that prints a line
// and stays, an exec in it, then StopPodSandbox and RemovePodSandbox. It returns the pod's and
// the container's ids, and what went wrong.
func churnPod(n *node, i int) (pod, ctr string, err error) {
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	logs, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(logs)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("soak-churn-%d", i), Uid: fmt.Sprintf("soak-churn-%d-uid", i), Namespace: "winnode"},
		Hostname:     fmt.Sprintf("soak-churn-%d", i),
		LogDirectory: logs,
		Labels:       map[string]string{"suite": "cri-soak"},
		Windows:      &runtimeapi.WindowsPodSandboxConfig{SecurityContext: &runtimeapi.WindowsSandboxSecurityContext{}},
	}
	if pod, err = n.rt.RunPodSandbox(c, cfg, ""); err != nil {
		return "", "", fmt.Errorf("RunPodSandbox: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("pod %s: %w", pod, err)
		}
	}()
	cc := containerConfig("ticks", "tick", "1")
	if ctr, err = n.rt.CreateContainer(c, pod, cc, cfg); err != nil {
		return pod, "", fmt.Errorf("CreateContainer: %w", err)
	}
	if err = n.rt.StartContainer(c, ctr); err != nil {
		return pod, ctr, fmt.Errorf("StartContainer: %w", err)
	}
	logPath := filepath.Join(logs, cc.LogPath)
	for {
		if l, _ := os.ReadFile(logPath); strings.Contains(string(l), " stdout F tick 1") {
			break
		}
		if c.Err() != nil {
			return pod, ctr, fmt.Errorf("no first output in %s", logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := fmt.Sprintf("exec %d\n", i)
	out, _, err := n.rt.ExecSync(c, ctr, []string{workload, "echo", strings.TrimSpace(want)}, time.Minute)
	if err != nil || string(out) != want {
		return pod, ctr, fmt.Errorf("ExecSync: %q, %v; want %q", out, err, want)
	}
	if err = n.rt.StopPodSandbox(c, pod); err != nil {
		return pod, ctr, fmt.Errorf("StopPodSandbox: %w", err)
	}
	if _, err = removePodSandbox(c, n.rt, pod); err != nil {
		return pod, ctr, fmt.Errorf("RemovePodSandbox: %w", err)
	}
	return pod, ctr, nil
}
