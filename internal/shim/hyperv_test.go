package shim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/protocols/diag"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// hvPod makes the layer folders of a Hyper-V pod's images: a pause base layer with the
// utility VM's boot files, and two application layers over it.
func (h *harness) hvLayers() (pause, app1, app2 string) {
	h.t.Helper()
	pause = filepath.Join(h.dir, "layers", "pause")
	boot := filepath.Join(pause, "UtilityVM", "Files", "EFI", "Microsoft", "Boot")
	if err := os.MkdirAll(boot, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(boot, "bootmgfw.efi"), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
	app1, app2 = filepath.Join(h.dir, "layers", "app1"), filepath.Join(h.dir, "layers", "app2")
	for _, d := range []string{app1, app2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			h.t.Fatal(err)
		}
	}
	return pause, app1, app2
}

func hyperVOptions(t *testing.T) *anypb.Any {
	a, err := typeurl.MarshalAnyToProto(&options.Options{SandboxIsolation: options.Options_HYPERVISOR})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hvBundle is a create request of a task of the Hyper-V pod "pod": kind is CRI's container
// type, parents its layers (nearest first).
func (h *harness) hvBundle(id, kind string, parents ...string) *taskapi.CreateTaskRequest {
	h.t.Helper()
	spec := testSpec()
	spec.Annotations = map[string]string{oci.AnnotationContainerType: kind, oci.AnnotationSandboxID: "pod"}
	spec.Hostname = "pod-host" // CRI sets every container's to the pod's
	req := h.bundle(id, spec)
	var quoted []string
	for _, p := range parents {
		quoted = append(quoted, `"`+filepath.ToSlash(p)+`"`)
	}
	req.Rootfs = []*types.Mount{{Type: "windows-layer", Source: filepath.Join(h.dir, "scratch-"+id),
		Options: []string{"rw", "parentLayerPaths=[" + strings.Join(quoted, ",") + "]"}}}
	req.Options = hyperVOptions(h.t)
	return req
}

// TestHyperVPod: the sandbox task is the pod's VM (<pod>@vm, hcsshim's defaults, clamped to
// the host); workload containers are hosted in it, sharing the pause layer's VSMB share; a
// workload's end never stops the VM; when the VM dies every task left gets one TaskExit and can
// be deleted, and nothing is left.
func TestHyperVPod(t *testing.T) {
	h := newHarness(t)
	h.svc.deps.ExitGrace = 50 * time.Millisecond // before any task is created
	ctx := context.Background()
	pause, app1, app2 := h.hvLayers()

	if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	vm := h.host.system("pod@vm")
	if vm == nil || h.host.system("pod") != nil {
		t.Fatalf("the sandbox made systems %v; want only its VM pod@vm", h.host.systems)
	}
	doc := vm.doc.(*schema2.ComputeSystem)
	if m, p := doc.VirtualMachine.ComputeTopology.Memory, doc.VirtualMachine.ComputeTopology.Processor; m.SizeInMB != 1024 || !m.AllowOvercommit || p.Count != 2 {
		t.Errorf("VM topology %+v %+v, want hcsshim's defaults", m, p)
	}
	if share := doc.VirtualMachine.Devices.VirtualSmb.Shares[0]; share.Name != "os" || share.Path != filepath.Join(pause, "UtilityVM", "Files") {
		t.Errorf("boot share %+v", share)
	}
	if resp, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "pod"}); err != nil || resp.Pid != 0 {
		t.Fatalf("start sandbox: %v, pid %v", err, resp)
	}

	for _, c := range []struct{ id, app string }{{"c1", app1}, {"c2", app2}} {
		h.createStart(h.hvBundle(c.id, "container", c.app, pause))
		cdoc := h.host.system(c.id).doc.(*schema2.ComputeSystem)
		hosted, ok := cdoc.HostedSystem.(*schema2.HostedSystem)
		if cdoc.HostingSystemId != "pod@vm" || !ok || cdoc.Container != nil {
			t.Fatalf("%s: document %+v, want a HostedSystem in pod@vm", c.id, cdoc)
		}
		// The pod's host name travels in the hosted container's document, as hcsshim's
		// hcsoci sends it: each container in the VM is a silo named so.
		if g := hosted.Container.GuestOs; g == nil || g.HostName != "pod-host" {
			t.Errorf("%s: GuestOs %+v, want HostName pod-host", c.id, g)
		}
		for _, l := range hosted.Container.Storage.Layers {
			if !strings.HasPrefix(l.Path, schema2.VSMBGuestPathPrefix) {
				t.Errorf("%s: layer %+v is not a VSMB share", c.id, l)
			}
		}
	}
	adds := 0
	for _, m := range vm.modified {
		if m.ResourcePath == schema2.ResourcePathVSMBShares && m.RequestType == schema2.RequestTypeAdd {
			adds++
		}
	}
	if adds != 3 {
		t.Errorf("%d VSMB shares added, want 3 (app1, pause once, app2)", adds)
	}

	// A workload ends and is deleted: the VM stays.
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if vm.terminated != 0 || h.host.system("pod@vm") == nil {
		t.Fatal("a workload's end stopped the pod's VM")
	}

	// The VM dies by itself (its hosted systems are not told, as if HCS's report was lost).
	created := h.hvBundle("c3", "container", app1, pause)
	if _, err := h.svc.Create(ctx, created); err != nil { // created, never started
		t.Fatal(err)
	}
	// Events reach the publisher through an ordered queue, after the RPC that caused them
	// returned: wait for the nine so far (create and start of pod, c1 and c2; c1's exit and
	// delete; c3's create), or a late one of c1's would count as the VM's.
	before := len(h.waitEvents(9))
	_ = vm.Terminate(ctx)
	for _, id := range []string{"pod", "c2", "c3"} {
		if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: id}); err != nil {
			t.Fatalf("wait %s after the VM died: %v", id, err)
		}
	}
	// Wait returns once the exit is recorded; its event follows through the ordered queue.
	var exits map[string]int
	for n := before + 1; ; n++ {
		exits = map[string]int{}
		for _, e := range h.waitEvents(n)[before:] {
			if e.topic == runtime.TaskExitEventTopic {
				exits[e.event.(*eventstypes.TaskExit).ContainerID]++
			}
		}
		if len(exits) == 3 {
			break
		}
	}
	for _, id := range []string{"pod", "c2", "c3"} {
		if exits[id] != 1 {
			t.Errorf("%s: %d TaskExit after the VM died, want 1 (all: %v)", id, exits[id], exits)
		}
	}
	for _, id := range []string{"c2", "c3", "pod"} {
		if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: id}); err != nil {
			t.Errorf("delete %s after the VM died: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(h.dir, id, "runhcs-state.json")); !os.IsNotExist(err) {
			t.Errorf("%s: state left in its bundle: %v", id, err)
		}
	}
	h.host.mu.Lock()
	left := len(h.host.systems)
	h.host.mu.Unlock()
	if left != 0 {
		t.Errorf("%d compute systems left: %v", left, h.host.systems)
	}
	if h.layers.count() != 0 {
		t.Errorf("%d layer chains mounted on the host", h.layers.count())
	}
}

// TestHyperVSandboxExec: an exec in a Hyper-V pod's sandbox (containerd 1.7's port-forward
// runs wincat.exe there) runs in the sandbox's own container, made in the pod's VM at the first
// exec from the sandbox's image and spec and running the sandbox's process, which keeps it up;
// later execs share it; when it stopped, the next exec makes it again; nothing is left after
// the sandbox's delete.
func TestHyperVSandboxExec(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pause, _, _ := h.hvLayers()
	if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "pod"}); err != nil {
		t.Fatalf("start sandbox: %v", err)
	}
	if h.host.system("pod") != nil {
		t.Fatal("the sandbox's container was made before any exec")
	}
	wincat := anyOf(t, &specs.Process{Args: []string{"wincat.exe", "127.0.0.1", "8080"}, Cwd: `C:\`})
	exec := func(id string) *fakeProcess {
		t.Helper()
		if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "pod", ExecID: id, Spec: wincat, Stdout: logFileURI(t, filepath.Join(h.dir, id+".log"))}); err != nil {
			t.Fatalf("exec %s in the sandbox: %v", id, err)
		}
		st, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "pod", ExecID: id})
		if err != nil {
			t.Fatalf("start exec %s: %v", id, err)
		}
		ctr := h.host.system("pod")
		if ctr == nil {
			t.Fatalf("exec %s: no sandbox container; systems %v", id, h.host.systems)
		}
		for i := 0; ; i++ {
			p := ctr.process(i)
			if p == nil {
				t.Fatalf("exec %s: pid %d is no process of the sandbox's container", id, st.Pid)
			}
			if p.pid == st.Pid {
				if p.params.CommandLine != "wincat.exe 127.0.0.1 8080" {
					t.Errorf("exec %s runs %q", id, p.params.CommandLine)
				}
				return p
			}
		}
	}
	end := func(id string, p *fakeProcess) {
		t.Helper()
		p.exit(0)
		if resp, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "pod", ExecID: id}); err != nil || resp.ExitStatus != 0 {
			t.Fatalf("wait exec %s: %v, %v", id, resp, err)
		}
		if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "pod", ExecID: id}); err != nil {
			t.Fatalf("delete exec %s: %v", id, err)
		}
	}
	e1 := exec("e1")
	ctr := h.host.system("pod")
	doc := ctr.doc.(*schema2.ComputeSystem)
	if _, ok := doc.HostedSystem.(*schema2.HostedSystem); doc.HostingSystemId != "pod@vm" || !ok {
		t.Fatalf("the sandbox's container: document %+v, want a HostedSystem in pod@vm", doc)
	}
	// Its first process is the sandbox's own (the pause image's command), without stdio.
	if p := ctr.process(0); p.params.CommandLine != `C:\workload\workload.exe echo hi` || p.params.CreateStdOutPipe || p.params.CreateStdInPipe {
		t.Errorf("the sandbox container's own process: %+v", p.params)
	}
	end("e1", e1)
	e2 := exec("e2")
	if h.host.system("pod") != ctr {
		t.Fatal("a second exec made a second container")
	}
	end("e2", e2)

	// The container stopped (its process ended, and HCS ended it): the next exec makes it anew.
	ctr.process(0).exit(0)
	_ = ctr.Terminate(ctx)
	e3 := exec("e3")
	if again := h.host.system("pod"); again == nil || again == ctr {
		t.Fatalf("after the container stopped, exec made %v", again)
	}
	end("e3", e3)

	// The sandbox's end (CRI's StopPodSandbox, then RemovePodSandbox): the VM stops, with the
	// container in it, and the delete leaves no compute system.
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "pod", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "pod"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "pod"}); err != nil {
		t.Fatalf("delete sandbox: %v", err)
	}
	h.host.mu.Lock()
	left := len(h.host.systems)
	h.host.mu.Unlock()
	if left != 0 {
		t.Errorf("%d compute systems left: %v", left, h.host.systems)
	}
	if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "pod", ExecID: "e4", Spec: wincat}); !errdefs.IsNotFound(err) {
		t.Errorf("exec after the sandbox's delete: %v, want NotFound", err)
	}
}

func anyOf(t *testing.T, v any) *anypb.Any {
	t.Helper()
	a, err := typeurl.MarshalAnyToProto(v)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestHyperVSandboxStatsAndUpdate: the sandbox's stats are its VM's ("vm" part only), and its
// Update resizes the VM.
func TestHyperVSandboxStatsAndUpdate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pause, _, _ := h.hvLayers()
	if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
		t.Fatal(err)
	}
	resp, err := h.svc.Stats(ctx, &taskapi.StatsRequest{ID: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(resp.Stats)
	if err != nil {
		t.Fatal(err)
	}
	st := v.(*stats.Statistics)
	if st.GetVm().GetProcessor().GetTotalRuntimeNs() != 700 || st.GetWindows() != nil {
		t.Errorf("sandbox stats %v, want the VM's only", st)
	}
	limit := uint64(2048 << 20)
	maximum := uint16(5000)
	res := anyOf(t, &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &limit}, CPU: &specs.WindowsCPUResources{Maximum: &maximum}})
	if _, err := h.svc.Update(ctx, &taskapi.UpdateTaskRequest{ID: "pod", Resources: res}); err != nil {
		t.Fatal(err)
	}
	vm := h.host.system("pod@vm")
	vm.mu.Lock()
	mods := vm.modified
	vm.mu.Unlock()
	if len(mods) != 2 || mods[0].ResourcePath != schema2.ResourcePathVMMemory || mods[0].Settings != uint64(2048) ||
		mods[1].ResourcePath != schema2.ResourcePathVMProcessorLimits || mods[1].Settings.(*schema2.ProcessorLimits).Limit != 5000 {
		t.Errorf("update requests %+v", mods)
	}
}

// TestHyperVRefusals: bad pods are refused naming why, changing nothing.
func TestHyperVRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("workload without its sandbox", func(t *testing.T) {
		h := newHarness(t)
		pause, app1, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("c1", "container", app1, pause)); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), oci.AnnotationSandboxID) {
			t.Errorf("create: %v, want FailedPrecondition naming the sandbox id", err)
		}
	})
	t.Run("sandbox without boot files", func(t *testing.T) {
		h := newHarness(t)
		_, app1, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", app1)); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "UtilityVM") {
			t.Errorf("create: %v, want FailedPrecondition naming UtilityVM", err)
		}
		if _, err := os.Stat(filepath.Join(h.dir, "pod", "runhcs-state.json")); !os.IsNotExist(err) {
			t.Errorf("state left: %v", err)
		}
	})
	t.Run("bad VM size", func(t *testing.T) {
		h := newHarness(t)
		pause, _, _ := h.hvLayers()
		req := h.hvBundle("pod", "sandbox", pause)
		spec := testSpec()
		spec.Annotations = map[string]string{oci.AnnotationContainerType: "sandbox", "io.microsoft.virtualmachine.computetopology.memory.sizeinmb": "big"}
		req.Bundle = h.bundle("pod", spec).Bundle
		if _, err := h.svc.Create(ctx, req); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "sizeinmb") {
			t.Errorf("create: %v, want InvalidArgument naming the annotation", err)
		}
		if h.host.system("pod@vm") != nil {
			t.Error("a VM was made")
		}
	})
	t.Run("process-isolated container in a Hyper-V pod", func(t *testing.T) {
		h := newHarness(t)
		pause, app1, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
			t.Fatal(err)
		}
		req := h.hvBundle("c1", "container", app1, pause)
		req.Options = nil
		if _, err := h.svc.Create(ctx, req); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("create: %v, want FailedPrecondition", err)
		}
	})
	t.Run("second sandbox in the pod's shim", func(t *testing.T) {
		h := newHarness(t)
		pause, _, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
			t.Fatal(err)
		}
		req := h.hvBundle("pod2", "sandbox", pause)
		spec, err := task.ReadSpec(req.Bundle)
		if err != nil {
			t.Fatal(err)
		}
		spec.Annotations[oci.AnnotationSandboxID] = "pod2"
		req.Bundle = h.bundle("pod2", spec).Bundle
		if _, err := h.svc.Create(ctx, req); !errdefs.IsAlreadyExists(err) || !strings.Contains(err.Error(), "Hyper-V pod pod") {
			t.Errorf("create: %v, want AlreadyExists naming the pod served", err)
		}
		if h.host.system("pod2@vm") != nil {
			t.Error("a second VM was made")
		}
	})
	t.Run("container naming another pod", func(t *testing.T) {
		h := newHarness(t)
		pause, app1, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
			t.Fatal(err)
		}
		req := h.hvBundle("c1", "container", app1, pause)
		spec, err := task.ReadSpec(req.Bundle)
		if err != nil {
			t.Fatal(err)
		}
		spec.Annotations[oci.AnnotationSandboxID] = "otherpod"
		req.Bundle = h.bundle("c1", spec).Bundle
		if _, err := h.svc.Create(ctx, req); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "otherpod") {
			t.Errorf("create: %v, want FailedPrecondition naming the sandbox id", err)
		}
	})
}

// TestHyperVDiag: shimdiag exec runs a process in the pod's VM itself (not in a container),
// relays its output and returns its exit code; shimdiag share adds a VSMB share and maps it in
// the guest.
func TestHyperVDiag(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pause, _, _ := h.hvLayers()
	if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
		t.Fatal(err)
	}
	c := serveDiag(t, h.svc)
	vm := h.host.system("pod@vm")
	go func() {
		for vm.process(0) == nil {
			time.Sleep(time.Millisecond)
		}
		p := vm.process(0)
		_, _ = p.stdoutW.Write([]byte("tasklist output\n"))
		p.exit(3)
	}()
	out := filepath.Join(h.dir, "diag.log")
	resp, err := c.DiagExecInHost(ctx, &diag.ExecProcessRequest{Args: []string{"tasklist"}, Stdout: logFileURI(t, out)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExitCode() != 3 {
		t.Errorf("exit code %d, want 3", resp.GetExitCode())
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "tasklist output\n" {
		t.Errorf("output %q, %v", b, err)
	}
	if p := vm.process(0); p.params.CommandLine != "tasklist" {
		t.Errorf("command line %q", p.params.CommandLine)
	}
	for _, id := range []string{"pod"} {
		if tk, _ := h.svc.get(id); len(tk.Execs()) != 0 {
			t.Errorf("the diag exec became an exec of task %s", id)
		}
	}

	share := t.TempDir()
	if _, err := c.DiagShare(ctx, &diag.ShareRequest{HostPath: share, UvmPath: `C:\share`, ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	vm.mu.Lock()
	mods := vm.modified
	vm.mu.Unlock()
	if len(mods) != 2 || mods[0].ResourcePath != schema2.ResourcePathVSMBShares {
		t.Fatalf("share requests %+v", mods)
	}
	g, ok := mods[1].GuestRequest.(*schema2.GuestModifySettingRequest)
	if !ok || g.ResourceType != schema2.ResourceTypeMappedDirectory || g.Settings.(*schema2.MappedDirectory).ContainerPath != `C:\share` {
		t.Errorf("guest request %+v", mods[1].GuestRequest)
	}
}

// TestHyperVStandalone: a Hyper-V task outside a pod gets a VM of its own (<id>@vm), booted from
// its own image, with its container hosted in it; Delete ends both and leaves no state.
func TestHyperVStandalone(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pause, app1, _ := h.hvLayers()
	req := h.hvBundle("c1", "container", app1, pause)
	spec := testSpec()
	req.Bundle = h.bundle("c1", spec).Bundle // no CRI annotations
	p := h.createStart(req)
	doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
	if doc.HostingSystemId != "c1@vm" || h.host.system("c1@vm") == nil {
		t.Fatalf("hosting system %q; systems %v", doc.HostingSystemId, h.host.systems)
	}
	// The VM is in the task's state, for the delete action after a shim crash.
	if b, err := os.ReadFile(filepath.Join(req.Bundle, "runhcs-state.json")); err != nil || !strings.Contains(string(b), `"vmId":"c1@vm"`) {
		t.Errorf("state %s, %v: want the VM's id", b, err)
	}
	p.exit(0)
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	h.host.mu.Lock()
	left := len(h.host.systems)
	h.host.mu.Unlock()
	if left != 0 {
		t.Errorf("systems left after delete: %v", h.host.systems)
	}
	if _, err := os.Stat(filepath.Join(req.Bundle, "runhcs-state.json")); !os.IsNotExist(err) {
		t.Errorf("state left: %v", err)
	}
}

// nicLog lists a VM's network requests in order: "Add NetworkNamespace", "PreAdd <endpoint>",
// "Add NIC <endpoint>", "Remove NIC <endpoint>", "Remove NetworkNamespace".
func nicLog(vm *fakeSystem) []string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	var out []string
	for _, m := range vm.modified {
		if strings.HasPrefix(m.ResourcePath, "VirtualMachine/Devices/NetworkAdapters/") {
			out = append(out, string(m.RequestType)+" NIC "+m.Settings.(schema2.NetworkAdapter).EndpointId)
			continue
		}
		g, ok := m.GuestRequest.(*schema2.GuestModifySettingRequest)
		if !ok {
			continue
		}
		switch g.ResourceType {
		case schema2.ResourceTypeNetworkNamespace:
			out = append(out, string(g.RequestType)+" NetworkNamespace")
		case schema2.ResourceTypeNetwork:
			if r := g.Settings.(*schema2.NetworkModifyRequest); r.RequestType == schema2.NetworkRequestPreAdd {
				out = append(out, "PreAdd "+r.Settings.(*hcn.HostComputeEndpoint).Id)
			}
		}
	}
	return out
}

// TestHyperVPodNetwork: the sandbox's HNS namespace goes into the pod's VM with its endpoints as
// NICs; its containers name the namespace and add nothing; stopping the sandbox removes the NICs
// and the namespace from the VM before the VM stops. A container of the pod with an endpoint
// list of its own is refused.
func TestHyperVPodNetwork(t *testing.T) {
	h := newHarness(t)
	f := newFakeHNS()
	h.svc.deps.HNS = f.dial
	ctx := context.Background()
	pause, app1, _ := h.hvLayers()
	ns, _ := f.CreateNamespace(ctx, hcn.NamespaceHost)
	for _, ep := range []string{ep1, ep2} {
		if err := f.AddNamespaceEndpoint(ctx, ns.Id, ep); err != nil {
			t.Fatal(err)
		}
	}
	withNS := func(req *taskapi.CreateTaskRequest) *taskapi.CreateTaskRequest {
		spec, err := task.ReadSpec(req.Bundle)
		if err != nil {
			t.Fatal(err)
		}
		spec.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: ns.Id}
		writeSpec(t, req.Bundle, spec)
		return req
	}
	if _, err := h.svc.Create(ctx, withNS(h.hvBundle("pod", "sandbox", pause))); err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	vm := h.host.system("pod@vm")
	want := []string{"Add NetworkNamespace", "PreAdd " + ep1, "Add NIC " + ep1, "PreAdd " + ep2, "Add NIC " + ep2}
	if got := nicLog(vm); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the VM's network requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h.createStart(withNS(h.hvBundle("c1", "container", app1, pause)))
	hosted := h.host.system("c1").doc.(*schema2.ComputeSystem).HostedSystem.(*schema2.HostedSystem)
	if n := hosted.Container.Networking; n == nil || n.Namespace != ns.Id || len(n.NetworkAdapters) != 0 {
		t.Errorf("the hosted container's networking %+v, want the pod's namespace %s", n, ns.Id)
	}
	if got := nicLog(vm); len(got) != len(want) {
		t.Errorf("a workload container changed the VM's network: %q", got[len(want):])
	}
	req := h.hvBundle("c2", "container", app1, pause)
	spec, _ := task.ReadSpec(req.Bundle)
	spec.Windows.Network = &specs.WindowsNetwork{EndpointList: []string{epBad}}
	writeSpec(t, req.Bundle, spec)
	if _, err := h.svc.Create(ctx, req); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "endpointList") {
		t.Errorf("a pod container with endpoints of its own: %v, want FailedPrecondition naming endpointList", err)
	}

	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "pod", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "Remove NIC "+ep2, "Remove NIC "+ep1, "Remove NetworkNamespace")
	if got := nicLog(vm); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after the sandbox's kill:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if vm.terminated == 0 {
		t.Error("the sandbox's kill did not stop the VM")
	}
	if eps := f.ns[ns.Id]; len(eps) != 2 {
		t.Errorf("the pod's namespace (CRI's) lost its endpoints: %q", eps)
	}
}

// TestHyperVStandaloneEndpoints: a Hyper-V task outside a pod with an endpoint list gets a
// namespace the shim makes, added to its own VM; delete removes the NICs, then the namespace.
func TestHyperVStandaloneEndpoints(t *testing.T) {
	h := newHarness(t)
	f := newFakeHNS()
	h.svc.deps.HNS = f.dial
	ctx := context.Background()
	pause, app1, _ := h.hvLayers()
	req := h.hvBundle("c1", "container", app1, pause)
	req.Bundle = h.bundle("c1", endpointSpec(ep1)).Bundle // no CRI annotations
	p := h.createStart(req)
	doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
	n := doc.HostedSystem.(*schema2.HostedSystem).Container.Networking
	if n == nil || n.Namespace == "" || len(n.NetworkAdapters) != 0 || !slices.Equal(f.ns[n.Namespace], []string{ep1}) {
		t.Fatalf("networking %+v (namespaces %v): want the shim's namespace holding %s", n, f.ns, ep1)
	}
	vm := h.host.system("c1@vm")
	if got := nicLog(vm); strings.Join(got, ",") != "Add NetworkNamespace,PreAdd "+ep1+",Add NIC "+ep1 {
		t.Errorf("the VM's network requests: %q", got)
	}
	p.exit(0)
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if got := nicLog(vm); len(got) != 5 || got[3] != "Remove NIC "+ep1 || got[4] != "Remove NetworkNamespace" {
		t.Errorf("after delete: %q, want the NIC and the namespace removed", got)
	}
	if f.count() != 0 {
		t.Errorf("namespaces left: %v", f.ns)
	}
}

// writeSpec rewrites a bundle's config.json.
func writeSpec(t *testing.T, bundle string, spec *specs.Spec) {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
