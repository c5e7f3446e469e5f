//go:build windows

package cri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// hypervHandler is the node's Hyper-V runtime handler (test/winnode's containerd config:
// SandboxIsolation = 1), containerd's Windows default name for it.
const hypervHandler = "runhcs-wcow-hypervisor"

// TestHyperVPod runs a pod with the Hyper-V handler, as kubelet does for a RuntimeClass that
// names it: the shim makes a utility VM for the pod (its VSMB shares are the node's host
// folders, which hcsemu resolves through the shim's drive mapping under Wine), and a container
// in it runs to its end with its output in the CRI log.
func TestHyperVPod(t *testing.T) {
	n := connect(t)
	podCfg := podConfig(t, "pod-hyperv")
	pod, err := n.rt.RunPodSandbox(ctx(t), podCfg, hypervHandler)
	if err != nil {
		t.Fatalf("RunPodSandbox with handler %s: %v", hypervHandler, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, pod)
		n.rt.RemovePodSandbox(c, pod)
	})
	st, err := n.rt.PodSandboxStatus(ctx(t), pod, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("PodSandboxStatus: %+v, %v; want ready", st.GetStatus(), err)
	}
	// The pod is a utility VM on the emulated host (hcsshim names it after the pod), running.
	list, err := hcs.NewHostClient().EnumerateComputeSystems(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	vm := false
	for _, p := range list {
		if strings.HasPrefix(p.Id, pod) && p.SystemType == schema2.SystemTypeVirtualMachine && p.State == schema2.StateRunning {
			vm = true
		}
	}
	if !vm {
		t.Fatalf("compute systems %+v: want a running VirtualMachine for pod %s", list, pod)
	}
	// Through the shim sandboxer there is no pause container: the VM boots from a view of the
	// pause image (the handler's SandboxImage) that the shim holds under a lease of its own.
	if lease, view := bootObjects(t, pod); lease != shimSandboxer(t) || view != shimSandboxer(t) {
		t.Fatalf("boot image lease %v, view %v: want both only under the shim sandboxer (%v)", lease, view, shimSandboxer(t))
	}
	cfg := containerConfig("in-vm", "echo", "hello from the utility VM")
	id := startContainer(t, n, pod, podCfg, cfg)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 || s.GetReason() != "Completed" {
		t.Fatalf("exit code %d, reason %q, message %q; want 0, Completed", s.GetExitCode(), s.GetReason(), s.GetMessage())
	}
	waitLog(t, filepath.Join(podCfg.LogDirectory, cfg.LogPath), " stdout F hello from the utility VM")

	// A volume of a Hyper-V pod is a VSMB share of the node's folder, added to the running VM
	// (hcsshim's mounts in a utility VM); the container reads the host's file through it.
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from the node through VSMB"), 0o644); err != nil {
		t.Fatal(err)
	}
	mcfg := containerConfig("in-vm-mount", "read", `C:\data\in.txt`)
	mcfg.Mounts = []*runtimeapi.Mount{{HostPath: host, ContainerPath: `C:\data`, Readonly: true}}
	mid := startContainer(t, n, pod, podCfg, mcfg)
	if s := waitExited(t, n, mid); s.GetExitCode() != 0 {
		b, _ := os.ReadFile(filepath.Join(podCfg.LogDirectory, mcfg.LogPath))
		t.Fatalf("read through the pod's VSMB mount: exit code %d, message %q, log %q", s.GetExitCode(), s.GetMessage(), b)
	}
	// read prints the file as it is, without a newline: containerd tags such a last line P
	// (partial).
	waitLog(t, filepath.Join(podCfg.LogDirectory, mcfg.LogPath), " stdout P from the node through VSMB")

	if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := removePodSandbox(ctx(t), n.rt, pod); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	if systems := computeSystems(t); containsPrefix(systems, pod) {
		t.Fatalf("compute systems after the pod's removal: %v", systems)
	}
	if lease, view := bootObjects(t, pod); lease || view {
		t.Fatalf("after the pod's removal: boot image lease %v, view %v; want neither", lease, view)
	}
}
