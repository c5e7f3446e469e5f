//go:build windows

package cri

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Issue 24 through CRI: a HostProcess pod (docs/hostprocess.md). A Windows kubelet sends
// windowsOptions.hostProcess as WindowsSandboxSecurityContext.HostProcess on the pod and
// WindowsContainerSecurityContext.HostProcess on each container; containerd's CRI takes the pod's
// flag as host network (no CNI call: internal/cri/server/helpers.go hostNetwork) and marks the
// sandbox and each container with microsoft.com/hostprocess-container "true"
// (docs/notes/hostprocess.md §1-2).

// hostProcessUser is the account the HostProcess pod runs as: a service logon, which needs no
// temporary account.
const hostProcessUser = `NT AUTHORITY\SYSTEM`

// hostProcessWorkload is the test image's workload as a HostProcess container names it: the
// image's files are on the host below %CONTAINER_SANDBOX_MOUNT_POINT%, which the shim expands in
// the command line (hcsshim internal/jobcontainers jobcontainer.go; runhcs the same).
const hostProcessWorkload = `%CONTAINER_SANDBOX_MOUNT_POINT%\workload\workload.exe`

// hostProcessPod is a HostProcess pod's config as a Windows kubelet sends it.
func hostProcessPod(t *testing.T, name string) *runtimeapi.PodSandboxConfig {
	cfg := podConfig(t, name)
	cfg.Windows.SecurityContext.HostProcess = true
	cfg.Windows.SecurityContext.RunAsUsername = hostProcessUser
	return cfg
}

// hostProcessImage is the test image with the Windows build of its workload
// (test/winnode HostProcessImage): a HostProcess container's processes run on the host, where
// only Windows executables start.
const hostProcessImage = "docker.io/runhcs/test-windows:latest"

// hostProcessContainer is a HostProcess container running the image's workload with args.
func hostProcessContainer(name string, args ...string) *runtimeapi.ContainerConfig {
	cfg := containerConfig(name, args...)
	cfg.Image = &runtimeapi.ImageSpec{Image: hostProcessImage}
	cfg.Command[0] = hostProcessWorkload
	cfg.Windows.SecurityContext.HostProcess = true
	cfg.Windows.SecurityContext.RunAsUsername = hostProcessUser
	return cfg
}

// runHostProcess runs cfg in the pod to its end and returns its CRI log; a non-zero exit fails the test.
func runHostProcess(t *testing.T, n *node, pod string, podCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	id := startContainer(t, n, pod, podCfg, cfg)
	s := waitExited(t, n, id)
	log := readLog(t, podCfg, cfg)
	if s.GetExitCode() != 0 {
		t.Fatalf("%s: exit code %d (%s), log %q", cfg.Metadata.Name, s.GetExitCode(), s.GetMessage(), log)
	}
	return log
}

// TestHostProcess runs a HostProcess pod and its containers through CRI: the pod has the host's
// network (its IP is not a pod IP), a container sees %CONTAINER_SANDBOX_MOUNT_POINT%, runs the
// image's executable and reads the image's files from below it, runs as each service account,
// stops gracefully on SIGTERM, writes to a host path and sees the host's processes; after
// RemovePodSandbox nothing of it is left: no mapping (mount), no process of its job.
func TestHostProcess(t *testing.T) {
	n := connect(t)
	waitNoShim(t)
	mounts := nodeMounts(t)
	podCfg := hostProcessPod(t, "pod-hostprocess")
	pod, err := n.rt.RunPodSandbox(ctx(t), podCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox of a HostProcess pod: %v", err)
	}
	removed := false
	t.Cleanup(func() {
		if removed {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, pod)
		n.rt.RemovePodSandbox(c, pod)
	})

	st, err := n.rt.PodSandboxStatus(ctx(t), pod, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.GetStatus(); s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("HostProcess pod state %v, want SANDBOX_READY", s.GetState())
	}
	// Host network: CRI made no pod network, so no address of the pod subnet and no endpoint.
	if ip, err := netip.ParseAddr(st.GetStatus().GetNetwork().GetIp()); err == nil && netip.MustParsePrefix(podSubnet).Contains(ip) {
		t.Errorf("HostProcess pod IP %s: a pod IP of %s, want the host's", ip, podSubnet)
	}
	if eps := endpoints(t); len(eps) != 0 {
		t.Errorf("HNS endpoints of a HostProcess pod: %v; want none", eps)
	}

	envCfg := hostProcessContainer("hpc-env", "env", "CONTAINER_SANDBOX_MOUNT_POINT")
	log := runHostProcess(t, n, pod, podCfg, envCfg)
	if !strings.Contains(log, ` stdout F CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\`) {
		t.Errorf("CRI log %q: want CONTAINER_SANDBOX_MOUNT_POINT=C:\\hpc\\<id>\\", log)
	}

	// The image's files, where %CONTAINER_SANDBOX_MOUNT_POINT% says (the shim expands it in
	// the command line).
	log = runHostProcess(t, n, pod, podCfg, hostProcessContainer("hpc-read", "read", `%CONTAINER_SANDBOX_MOUNT_POINT%\License.txt`))
	if !strings.Contains(log, "runhcs test image") {
		t.Errorf("the image's License.txt through %%CONTAINER_SANDBOX_MOUNT_POINT%%: log %q", log)
	}

	// The other service accounts log on too (a service logon each; no temporary account).
	for _, user := range []string{`NT AUTHORITY\LOCAL SERVICE`, `NT AUTHORITY\NETWORK SERVICE`} {
		cfg := hostProcessContainer("hpc-as-"+strings.ReplaceAll(strings.ToLower(user[len(`NT AUTHORITY\`):]), " ", "-"), "echo", "as "+user)
		cfg.Windows.SecurityContext.RunAsUsername = user
		if log := runHostProcess(t, n, pod, podCfg, cfg); !strings.Contains(log, "as "+user) {
			t.Errorf("a container running as %s: log %q", user, log)
		}
	}

	// A local group: the shim makes a temporary local account, a member of the group, named
	// after the container (hcsshim: the id's first 20 characters), runs the container as it
	// and deletes it with the container. This test runs in the node's Windows environment, so
	// it sees the host's accounts.
	grpCfg := hostProcessContainer("hpc-as-users", "sleep", "600")
	grpCfg.Windows.SecurityContext.RunAsUsername = "Users"
	grpID := startContainer(t, n, pod, podCfg, grpCfg)
	account := grpID[:20]
	if r := localAccount(account); r != 0 {
		t.Errorf("the temporary account %s of a container running as the group Users: NetUserGetInfo = %d, want it there", account, r)
	}
	if err := n.rt.StopContainer(ctx(t), grpID, 0); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if err := n.rt.RemoveContainer(ctx(t), grpID); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if r := localAccount(account); r != nerrUserNotFound {
		t.Errorf("the temporary account %s after RemoveContainer: NetUserGetInfo = %d, want NERR_UserNotFound (%d)", account, r, nerrUserNotFound)
	}

	// A graceful stop, as kubelet stops a pod: StopContainer's SIGTERM reaches the process as a
	// console control event (CTRL_BREAK_EVENT, which the Go runtime reports as os.Interrupt),
	// and the container's exit code is the process's own, not a kill's after the grace period.
	stopCfg := hostProcessContainer("hpc-stop", "wait-signal", "5")
	stopID := startContainer(t, n, pod, podCfg, stopCfg)
	stopLog := filepath.Join(podCfg.LogDirectory, stopCfg.LogPath)
	waitLog(t, stopLog, " stdout F waiting")
	if err := n.rt.StopContainer(ctx(t), stopID, 60); err != nil {
		t.Fatalf("StopContainer of a HostProcess container: %v", err)
	}
	if s := waitExited(t, n, stopID); s.GetExitCode() != 5 {
		t.Errorf("HostProcess container stopped with a grace period: exit code %d, want 5 (its own, after the control event)", s.GetExitCode())
	}
	waitLog(t, stopLog, " stdout F got SIGINT")
	if err := n.rt.RemoveContainer(ctx(t), stopID); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}

	// A host path: the folder is the test's own, on the same Wine prefix as the node's processes.
	hostFile := filepath.Join(t.TempDir(), "hpc-wrote.txt")
	runHostProcess(t, n, pod, podCfg, hostProcessContainer("hpc-write", "write", hostFile, "from a HostProcess container"))
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "from a HostProcess container" {
		t.Errorf("the host file a HostProcess container wrote: %q, %v", b, err)
	}

	// The host's processes: containerd.exe is one of them, which no container's view has.
	log = runHostProcess(t, n, pod, podCfg, hostProcessContainer("hpc-ps", "ps"))
	if !strings.Contains(strings.ToLower(log), "containerd.exe") {
		t.Errorf("ps in a HostProcess container: log %q, want the host's containerd.exe", log)
	}

	if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := removePodSandbox(ctx(t), n.rt, pod); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	removed = true
	waitNoShim(t)
	if got := nodeMounts(t); got != mounts {
		t.Errorf("mounts under the node's root: %d before the HostProcess pod, %d after its removal", mounts, got)
	}
	for _, p := range processes(t) {
		if strings.EqualFold(p, "workload.exe") {
			t.Errorf("a workload.exe runs after the HostProcess pod's removal: %v", processes(t))
			break
		}
	}
}

var procNetUserGetInfo = windows.NewLazySystemDLL("netapi32.dll").NewProc("NetUserGetInfo")

const nerrUserNotFound = 2221 // lmerr.h: NERR_BASE + 121

// localAccount answers NetUserGetInfo's status for the host's local account name: 0 if it exists.
func localAccount(name string) uintptr {
	var buf *byte
	r, _, _ := procNetUserGetInfo.Call(0, uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(name))), 0, uintptr(unsafe.Pointer(&buf)))
	if r == 0 {
		windows.NetApiBufferFree(buf)
	}
	return r
}

// TestHostProcessRefusals: a pod and its containers must agree on HostProcess, both ways, and a
// disagreement is refused at CreateContainer naming the field, with no container made
// (containerd's CRI checks it before the runtime is asked: internal/cri/server
// container_create.go; the shim refuses it too for other clients, internal/shim
// TestHostProcessRefusals).
func TestHostProcessRefusals(t *testing.T) {
	n := connect(t)
	refused := func(t *testing.T, pod string, podCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) {
		t.Helper()
		if _, err := n.img.PullImage(ctx(t), cfg.Image, nil, podCfg); err != nil {
			t.Fatalf("PullImage: %v", err)
		}
		id, err := n.rt.CreateContainer(ctx(t), pod, cfg, podCfg)
		if err == nil {
			n.rt.RemoveContainer(ctx(t), id)
			t.Fatalf("CreateContainer %s: made %s, want a refusal", cfg.Metadata.Name, id)
		}
		if !strings.Contains(err.Error(), "HostProcess") {
			t.Errorf("CreateContainer %s: %v; want the error to name the HostProcess field", cfg.Metadata.Name, err)
		}
		cs, err := n.rt.ListContainers(ctx(t), &runtimeapi.ContainerFilter{PodSandboxId: pod})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 0 {
			t.Errorf("containers of pod %s after the refusal: %d, want none", pod, len(cs))
		}
	}
	t.Run("container not HostProcess in a HostProcess pod", func(t *testing.T) {
		podCfg := hostProcessPod(t, "pod-hpc-plain-container")
		pod := runPodConfig(t, n, podCfg, "")
		refused(t, pod, podCfg, containerConfig("plain", "echo", "not a HostProcess container"))
	})
	t.Run("HostProcess container in a pod that is not", func(t *testing.T) {
		pod, podCfg := runPod(t, n, "pod-plain-hpc-container")
		refused(t, pod, podCfg, hostProcessContainer("hpc", "echo", "a HostProcess container"))
	})
}
