package shim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	sandboxapi "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// fakeBootImage is a Hyper-V sandbox's boot image whose layers are folders of the harness.
type fakeBootImage struct {
	mu       sync.Mutex
	ref      string
	parents  []string
	err      error
	acquired int
	released int
}

func (b *fakeBootImage) Acquire(_ context.Context, record func(sandbox.BootRecord) error) ([]string, error) {
	if err := record(sandbox.BootRecord{Image: b.ref, Snapshotter: "wcow", View: bootName("pod"), Lease: bootName("pod")}); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	b.acquired++
	return b.parents, nil
}

func (b *fakeBootImage) Release(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acquired > b.released {
		b.released++
	}
	return nil
}

// hvSandboxRequest is what containerd's sandbox controller sends for a pod of the Hyper-V
// handler, after the start action kept the handler's options (sandbox_image set).
func (h *harness) hvSandboxRequest(t *testing.T, o *options.Options) *sandboxapi.CreateSandboxRequest {
	t.Helper()
	req := h.sandboxRequest("pod", &criapi.PodSandboxConfig{Annotations: map[string]string{oci.AnnotationVMMemorySizeInMB: "512"}})
	a, err := typeurl.MarshalAnyToProto(o)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordSandboxOptions(req.BundlePath, raw); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestHyperVSandboxAPI: a Hyper-V pod through the sandbox API. StartSandbox makes the pod's
// VM (<pod>@vm) from the boot image's layers, sized by the options and the pod's annotations;
// the pod's containers are hosted in it; SandboxMetrics gives the VM's statistics; a VM crash
// ends the sandbox (WaitSandbox returns 1) and its containers; ShutdownSandbox removes the VM
// and then the boot image's view. containerd hears of no task named after the sandbox.
func TestHyperVSandboxAPI(t *testing.T) {
	h := newHarness(t)
	h.svc.deps.ExitGrace = 50 * time.Millisecond
	sd := newFakeShutdown()
	h.svc.shutdown = sd
	sv := sandboxService{h.svc}
	ctx := context.Background()
	pause, app1, _ := h.hvLayers()
	const ref = "registry.k8s.io/pause:3.10.2"
	boot := &fakeBootImage{ref: ref, parents: []string{pause}}
	h.svc.bootImage = func(id, r string) (sandbox.BootImage, error) {
		if id != "pod" || r != ref {
			return nil, errors.New("boot image of " + id + ": " + r)
		}
		return boot, nil
	}
	// The pod's HNS namespace, made by CRI before CreateSandbox, with its endpoint.
	f := newFakeHNS()
	h.svc.deps.HNS = f.dial
	ns, _ := f.CreateNamespace(ctx, hcn.NamespaceHost)
	if err := f.AddNamespaceEndpoint(ctx, ns.Id, ep1); err != nil {
		t.Fatal(err)
	}
	req := h.hvSandboxRequest(t, &options.Options{SandboxIsolation: options.Options_HYPERVISOR, SandboxImage: ref, VmProcessorCount: 1})
	req.NetnsPath = ns.Id
	if _, err := sv.CreateSandbox(ctx, req); err != nil {
		t.Fatal(err)
	}
	if h.host.system("pod@vm") != nil || boot.acquired != 0 {
		t.Fatal("CreateSandbox made the VM or the view: that is StartSandbox's")
	}
	if _, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod"}); err != nil {
		t.Fatal(err)
	}
	vm := h.host.system("pod@vm")
	if vm == nil || boot.acquired != 1 {
		t.Fatalf("StartSandbox: systems %v, boot image acquired %d times", h.host.systems, boot.acquired)
	}
	doc := vm.doc.(*schema2.ComputeSystem)
	if m, p := doc.VirtualMachine.ComputeTopology.Memory, doc.VirtualMachine.ComputeTopology.Processor; m.SizeInMB != 512 || p.Count != 1 {
		t.Errorf("VM topology %+v %+v, want the pod's annotation's 512 MB and the options' 1 processor", m, p)
	}
	if share := doc.VirtualMachine.Devices.VirtualSmb.Shares[0]; share.Name != "os" || share.Path != filepath.Join(pause, "UtilityVM", "Files") {
		t.Errorf("boot share %+v, want the boot image's UtilityVM", share)
	}
	// The VM joins the pod's namespace, its endpoint a NIC, as a pause container's VM does.
	if got, want := nicLog(vm), []string{"Add NetworkNamespace", "PreAdd " + ep1, "Add NIC " + ep1}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the VM's network requests %q, want %q", got, want)
	}
	st, err := sv.SandboxStatus(ctx, &sandboxapi.SandboxStatusRequest{SandboxID: "pod", Verbose: true})
	if err != nil || st.State != sandbox.StateReady || st.Info["kind"] != sandbox.KindHyperV {
		t.Fatalf("status: %v %v", st, err)
	}
	m, err := sv.SandboxMetrics(ctx, &sandboxapi.SandboxMetricsRequest{SandboxID: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := typeurl.UnmarshalAny(m.Metrics.Data); err != nil || v.(*stats.Statistics).GetVm() == nil {
		t.Fatalf("SandboxMetrics: %v %v; want the VM's", v, err)
	}

	// A container of the pod is hosted in its VM.
	h.createStart(h.hvBundle("c1", "container", app1, pause))
	if cdoc := h.host.system("c1").doc.(*schema2.ComputeSystem); cdoc.HostingSystemId != "pod@vm" {
		t.Fatalf("c1: hosted in %q, want pod@vm", cdoc.HostingSystemId)
	}

	waited := make(chan *sandboxapi.WaitSandboxResponse, 1)
	go func() {
		w, err := sv.WaitSandbox(ctx, &sandboxapi.WaitSandboxRequest{SandboxID: "pod"})
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	// The VM crashes: the sandbox ends with 1, its container with it.
	_ = vm.Terminate(ctx)
	if w := <-waited; w == nil || w.ExitStatus != 1 {
		t.Fatalf("WaitSandbox after a VM crash: %v, want exit status 1", w)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Create(ctx, h.hvBundle("c2", "container", app1, pause)); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Create in a crashed sandbox: %v", err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.StopSandbox(ctx, &sandboxapi.StopSandboxRequest{SandboxID: "pod"}); err != nil {
		t.Fatalf("StopSandbox after the crash: %v", err)
	}
	ended := sd.endsAfter(t, func(ctx context.Context) error {
		_, err := sv.ShutdownSandbox(ctx, &sandboxapi.ShutdownSandboxRequest{SandboxID: "pod"})
		return err
	})
	if h.host.system("pod@vm") != nil || boot.released != 1 {
		t.Fatalf("ShutdownSandbox: systems %v, boot image released %d times", h.host.systems, boot.released)
	}
	for _, f := range []string{sandbox.StateFile, "runhcs-state.json"} {
		if _, err := os.Stat(filepath.Join(req.BundlePath, f)); !os.IsNotExist(err) {
			t.Errorf("%s left in the sandbox's bundle: %v", f, err)
		}
	}
	if !ended {
		t.Fatal("the shim did not exit after ShutdownSandbox")
	}
	for _, e := range h.pub.all() {
		if e.topic != runtime.TaskExitEventTopic && e.topic != runtime.TaskCreateEventTopic && e.topic != runtime.TaskStartEventTopic && e.topic != runtime.TaskDeleteEventTopic {
			continue
		}
		if x, ok := e.event.(*eventstypes.TaskExit); ok && x.ContainerID == "pod" {
			t.Errorf("a TaskExit of the sandbox reached containerd: %+v", x)
		}
		if x, ok := e.event.(*eventstypes.TaskCreate); ok && x.ContainerID == "pod" {
			t.Errorf("a TaskCreate of the sandbox reached containerd: %+v", x)
		}
	}
}

// A Hyper-V sandbox without sandbox_image, or whose boot image is not there, is refused,
// naming it, and leaves nothing.
func TestHyperVSandboxBootImageRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	sv := sandboxService{h.svc}
	pause, _, _ := h.hvLayers()
	boot := &fakeBootImage{ref: "pause", parents: []string{pause}, err: errdefs.ErrFailedPrecondition}
	h.svc.bootImage = func(string, string) (sandbox.BootImage, error) { return boot, nil }
	req := h.hvSandboxRequest(t, &options.Options{SandboxIsolation: options.Options_HYPERVISOR, SandboxImage: "pause"})
	if _, err := sv.CreateSandbox(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod"}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "boot image") {
		t.Fatalf("StartSandbox without the boot image: %v", err)
	}
	if h.host.system("pod@vm") != nil {
		t.Fatal("a VM without a boot image")
	}
	// A boot image without a UtilityVM folder: the view is given back.
	boot.err, boot.parents = nil, []string{filepath.Join(h.dir, "layers", "app1")}
	if _, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod"}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "UtilityVM") {
		t.Fatalf("StartSandbox from a layer without UtilityVM: %v", err)
	}
	if boot.acquired != 1 || boot.released != 1 {
		t.Fatalf("boot image acquired %d, released %d times; want 1, 1", boot.acquired, boot.released)
	}
	if _, err := sv.ShutdownSandbox(ctx, &sandboxapi.ShutdownSandboxRequest{SandboxID: "pod"}); err != nil {
		t.Fatal(err)
	}
	if sandbox.IsBundle(req.BundlePath) {
		t.Fatal("state left")
	}
}
