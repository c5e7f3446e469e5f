//go:build windows

package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The single-file mounts kubelet gives every Windows container (k8s pkg/kubelet/kuberuntime
// kuberuntime_container.go makeMounts, pkg/kubelet kubelet_pods.go makeHostsMount):
//   - the termination message file: an empty file <pod container dir>\<8 hex digits> at
//     MakeAbsolutePath("windows", "/dev/termination-log"), which is "c:/dev/termination-log";
//     kubelet finds it again by that ContainerPath in ContainerStatus.Mounts and reads at most
//     the last 4096 bytes of its HostPath (getTerminationMessage);
//   - the pod's hosts file <pod dir>\etc-hosts at C:\Windows\System32\drivers\etc\hosts,
//     read-write, written by kubelet with the pod's IP once the sandbox runs.
const (
	terminationMessagePath = "c:/dev/termination-log"
	windowsEtcHostsPath    = `C:\Windows\System32\drivers\etc\hosts`
	maxTerminationMessage  = 4096 // kubecontainer.MaxContainerTerminationMessageLength
)

// TestFileMounts mounts single host files into process-isolated containers as kubelet does:
// the container writes its termination message, which kubelet's way of reading finds on the
// host; it reads the hosts file the test wrote for the pod; and a file mounted read-only (a
// ConfigMap key with subPath) can be read and not written. Each check fails when the file is
// not mapped (the container's write lands in its own volume, its read finds no file or the
// image's) or when read-only is not enforced. In a Hyper-V pod each file is a single-file VSMB
// share of its folder (hcsshim's AddVSMB with RestrictFileAccess), mapped into the container.
func TestFileMounts(t *testing.T) {
	for _, handler := range []string{"", hypervHandler} {
		name := "process"
		if handler != "" {
			name = "hyperv"
		}
		t.Run(name, func(t *testing.T) { fileMounts(t, handler) })
	}
}

func fileMounts(t *testing.T, handler string) {
	n := connect(t)
	podDir := t.TempDir()
	podCfg := podConfig(t, "pod-files")
	pod, err := n.rt.RunPodSandbox(ctx(t), podCfg, handler)
	if err != nil {
		t.Fatalf("RunPodSandbox with handler %q: %v", handler, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, pod)
		n.rt.RemovePodSandbox(c, pod)
	})
	// Kubelet writes the pod's hosts file after the sandbox has its IP.
	hostsFile := filepath.Join(podDir, "etc-hosts")
	hosts := fmt.Sprintf("# Kubernetes-managed hosts file.\r\n127.0.0.1\tlocalhost\r\n%s\tpod-files\r\n", podIP(t, n, pod))
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(podDir, "settings.conf")
	if err := os.WriteFile(configFile, []byte("from-the-configmap"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The container ends after writing its termination message, as kubelet expects.
	const message = "pod-files: finished; the message is in the termination log"
	term := containerConfig("terminates", "write", `C:\dev\termination-log`, message)
	term.Mounts = []*runtimeapi.Mount{terminationMount(t, podDir), {HostPath: hostsFile, ContainerPath: windowsEtcHostsPath}}
	id := startContainer(t, n, pod, podCfg, term)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("writing the termination message: exit code %d (%s)", s.GetExitCode(), readLog(t, podCfg, term))
	}
	if got := terminationMessage(t, n, id); got != message {
		t.Errorf("termination message read as kubelet does: %q; want %q", got, message)
	}

	sleeper := containerConfig("reads", "sleep", "600")
	sleeper.Mounts = []*runtimeapi.Mount{
		terminationMount(t, podDir),
		{HostPath: hostsFile, ContainerPath: windowsEtcHostsPath},
		{HostPath: configFile, ContainerPath: `C:\config\settings.conf`, Readonly: true},
	}
	id = startContainer(t, n, pod, podCfg, sleeper)
	for file, want := range map[string]string{windowsEtcHostsPath: hosts, `C:\config\settings.conf`: "from-the-configmap"} {
		stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "read", file}, time.Minute)
		if err != nil || string(stdout) != want {
			t.Errorf("read %s: stdout %q, stderr %q, %v; want %q", file, stdout, stderr, err, want)
		}
	}
	_, _, err = n.rt.ExecSync(ctx(t), id, []string{workload, "write", `C:\config\settings.conf`, "refused"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 {
		t.Errorf("write to the read-only file: %v; want a failing exit", err)
	}
	if b, err := os.ReadFile(configFile); err != nil || string(b) != "from-the-configmap" {
		t.Errorf("the read-only host file holds %q, %v after the container's write", b, err)
	}
	// The hosts file is mounted read-write (kubelet's ReadOnly: false): the container's edit
	// reaches the host's file.
	if _, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "write", windowsEtcHostsPath, hosts + "10.9.9.9\tadded\r\n"}, time.Minute); err != nil {
		t.Errorf("write to the hosts file: %v (stderr %q)", err, stderr)
	}
	if b, _ := os.ReadFile(hostsFile); string(b) != hosts+"10.9.9.9\tadded\r\n" {
		t.Errorf("the host's hosts file after the container's edit: %q", b)
	}
}

// terminationMount makes the termination message file as kubelet does (an empty file, 0666,
// named by 8 hex digits in the pod container's folder) and returns its mount.
func terminationMount(t *testing.T, podDir string) *runtimeapi.Mount {
	t.Helper()
	dir, err := os.MkdirTemp(podDir, "container-")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff))
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	return &runtimeapi.Mount{HostPath: file, ContainerPath: terminationMessagePath}
}

// terminationMessage reads a container's termination message as kubelet's getTerminationMessage
// does: the mount whose ContainerPath is the termination message path, in ContainerStatus, and
// at most the last 4096 bytes of its HostPath.
func terminationMessage(t *testing.T, n *node, id string) string {
	t.Helper()
	st, err := n.rt.ContainerStatus(ctx(t), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	for _, m := range st.GetStatus().GetMounts() {
		if m.GetContainerPath() != terminationMessagePath {
			continue
		}
		f, err := os.Open(m.GetHostPath())
		if err != nil {
			t.Fatalf("termination message file: %v", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if off := fi.Size() - maxTerminationMessage; off > 0 {
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Fatalf("ContainerStatus.Mounts %v: no mount at %s", st.GetStatus().GetMounts(), terminationMessagePath)
	return ""
}
