package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Tests of utility VMs and hosted containers against the engine itself (root: namespaces,
// cgroups, mounts). The layers are folders laid out as the test images' base layer
// (test/image), with the build recorded as the emulator's convention says (osbuild.go).

// recorder is a Subscriber that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []wire.Event
	more   chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) Notify(ev wire.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// exited waits for the SystemExited event of id and returns its status.
func (r *recorder) exited(t *testing.T, id string) schema2.SystemExitStatus {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.Type == computecore.EventSystemExited && ev.System.ID == id {
				r.mu.Unlock()
				var st schema2.SystemExitStatus
				if err := json.Unmarshal([]byte(ev.Data), &st); err != nil {
					t.Fatalf("exit status of %s: %v", id, err)
				}
				return st
			}
		}
		r.mu.Unlock()
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("no SystemExited for %s", id)
		}
	}
}

// newVMEngine is an engine whose host has the given build and memory.
func newVMEngine(t *testing.T, build string, memMB uint64) *Engine {
	t.Helper()
	requireRoot(t)
	e, err := NewEngine(context.Background(), Config{Root: filepath.Join(t.TempDir(), "root"), OSVersion: build, HostMemoryMB: memMB, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return e
}

// newLayer makes a base layer folder of the given build, with the workload in Files and in
// UtilityVM/Files, and the boot manager when boot is true.
func newLayer(t *testing.T, build string, boot bool) string {
	t.Helper()
	l := t.TempDir()
	wl, err := os.ReadFile(workloadBinary.build(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"Files/workload/workload.exe":           wl,
		"Files/" + osBuildFile:                  []byte(build + "\r\n"),
		"UtilityVM/Files/workload/workload.exe": wl,
		"UtilityVM/Files/" + osBuildFile:        []byte(build + "\r\n"),
	}
	if boot {
		files["UtilityVM/Files/EFI/Microsoft/Boot/bootmgfw.efi"] = []byte("boot")
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(l, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l, p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func newDisk(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandbox.vhdx")
	if err := os.WriteFile(p, emuvhdx.Encode(1<<30, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const ctrl0 = "df6d0690-79e5-55b6-a5ec-c1e2f77f580a"

// vmDocument is hcsshim's utility VM document (docs/notes/hyperv.md §1) with a guest connection.
func vmDocument(layer, scratch string, memMB uint64, cpus uint32) string {
	cs := schema2.ComputeSystem{
		Owner: "test", SchemaVersion: &schema2.SchemaV21, ShouldTerminateOnLastHandleClosed: true,
		VirtualMachine: &schema2.VirtualMachine{
			StopOnReset: true,
			Chipset:     &schema2.Chipset{Uefi: &schema2.Uefi{BootThis: &schema2.UefiBootEntry{DeviceType: schema2.UVMBootDeviceTypeVmbFs, DevicePath: schema2.UVMBootDevicePath}}},
			ComputeTopology: &schema2.Topology{
				Memory:    &schema2.VirtualMachineMemory{SizeInMB: memMB, AllowOvercommit: true},
				Processor: &schema2.VirtualMachineProcessor{Count: cpus},
			},
			Devices: &schema2.Devices{
				Scsi: map[string]schema2.Scsi{ctrl0: {Attachments: map[string]schema2.Attachment{"0": {Type: "VirtualDisk", Path: scratch}}}},
				VirtualSmb: &schema2.VirtualSmb{DirectFileMappingInMB: 1024, Shares: []schema2.VirtualSmbShare{{
					Name: schema2.UVMOSShareName, Path: filepath.Join(layer, "UtilityVM", "Files"),
					Options: &schema2.VirtualSmbShareOptions{ReadOnly: true, ShareRead: true, CacheIo: true, PseudoOplocks: true, TakeBackupPrivilege: true},
				}}},
			},
			GuestConnection: &schema2.GuestConnection{},
		},
	}
	b, _ := json.Marshal(cs)
	return string(b)
}

func modify(e *Engine, id string, req schema2.ModifySettingRequest) error {
	b, _ := json.Marshal(req)
	return e.Modify(context.Background(), wire.SystemRef{ID: id}, string(b))
}

// runIn runs a command line in a system and returns its exit code and stdout.
func runIn(t *testing.T, e *Engine, id, cmdline string) (uint32, string) {
	t.Helper()
	sub := newRecorder()
	params, _ := json.Marshal(schema2.ProcessParameters{CommandLine: cmdline, CreateStdOutPipe: true, CreateStdErrPipe: true})
	r, files, err := e.CreateProcess(context.Background(), wire.SystemRef{ID: id}, string(params), sub)
	if err != nil {
		t.Fatalf("run %q in %s: %v", cmdline, id, err)
	}
	var out, errOut []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errOut, _ = io.ReadAll(files[1]) }()
	out, _ = io.ReadAll(files[0])
	wg.Wait()
	for _, f := range files {
		f.Close()
	}
	deadline := time.After(60 * time.Second)
	for {
		sub.mu.Lock()
		for _, ev := range sub.events {
			if ev.Type == computecore.EventProcessExited && ev.PID == r.PID {
				sub.mu.Unlock()
				var st schema2.ProcessExitedEventData
				json.Unmarshal([]byte(ev.Data), &st)
				if len(errOut) > 0 || st.ExitCode != 0 {
					t.Logf("%q stderr: %s", cmdline, errOut)
				}
				return st.ExitCode, string(out)
			}
		}
		sub.mu.Unlock()
		select {
		case <-sub.more:
		case <-deadline:
			t.Fatalf("%q in %s did not exit", cmdline, id)
		}
	}
}

// startVM creates and starts a VM from a new layer of build.
func startVM(t *testing.T, e *Engine, id, build string, memMB uint64) (*recorder, string) {
	t.Helper()
	layer := newLayer(t, build, true)
	sub := newRecorder()
	if _, err := e.CreateSystem(context.Background(), id, vmDocument(layer, newDisk(t), memMB, 1), sub); err != nil {
		t.Fatalf("create VM: %v", err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: id}, ""); err != nil {
		t.Fatalf("start VM: %v", err)
	}
	return sub, layer
}

func TestVMIsABoundary(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	sub, _ := startVM(t, e, "pod@vm", "10.0.17763.1", 128)

	// Its own PID namespace: the VM init is PID 1 and nothing of the host is listed.
	code, out := runIn(t, e, "pod@vm", `C:\workload\workload.exe ps`)
	if code != 0 {
		t.Fatalf("ps exited %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "1 hcsemu-vm-init" || !strings.HasSuffix(lines[1], "workload.exe") {
		t.Errorf("the VM lists %q, want only its init (PID 1) and ps itself", lines)
	}

	// Its memory is a limit: 32 MiB fit, 256 MiB do not (the VM has 128).
	if code, out := runIn(t, e, "pod@vm", `C:\workload\workload.exe alloc 32`); code != 0 || !strings.Contains(out, "allocated 32 MiB") {
		t.Errorf("alloc 32 in a 128 MB VM: exit %d, %q", code, out)
	}
	if code, out := runIn(t, e, "pod@vm", `C:\workload\workload.exe alloc 256`); code == 0 || strings.Contains(out, "allocated") {
		t.Errorf("alloc 256 in a 128 MB VM: exit %d, %q; want it killed", code, out)
	}

	props, err := e.Properties(context.Background(), wire.SystemRef{ID: "pod@vm"}, `{"PropertyTypes":["Memory","Statistics","GuestConnection"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var p schema2.Properties
	json.Unmarshal([]byte(props), &p)
	if p.SystemType != schema2.SystemTypeVirtualMachine || p.State != schema2.StateRunning || p.Memory == nil ||
		p.Memory.VirtualMachineMemory.AssignedMemory != 128<<20/4096 || p.Statistics == nil || p.GuestConnectionInfo == nil {
		t.Errorf("properties: %s", props)
	}
	if p.RuntimeId == "" || !guidRe.MatchString(p.RuntimeId) {
		t.Errorf("RuntimeId %q is not a GUID", p.RuntimeId)
	}
	if p.Statistics.Processor.TotalRuntime100ns == 0 {
		t.Errorf("no CPU time accounted to the VM after running programs in it: %s", props)
	}

	// Shutdown: GracefulExit.
	if err := e.Shutdown(context.Background(), wire.SystemRef{ID: "pod@vm"}, ""); err != nil {
		t.Fatal(err)
	}
	if st := sub.exited(t, "pod@vm"); st.ExitType != schema2.NotificationGracefulExit || st.Status != 0 {
		t.Errorf("exit %+v", st)
	}
}

// hostContainer adds what a container in the VM needs, as hcsshim's HCS-mediated path does: a
// VSMB share of the layer, a scratch disk on LUN 1 mounted in the guest, the layers combined on
// it, and the hosted system.
// The scratch is a folder with Files/ and its sandbox.vhdx naming the folder as its file
// system, as the Linux snapshotter makes them; it returns the folder.
func hostContainer(t *testing.T, e *Engine, vmID, id, layer string, sub Subscriber) (string, error) {
	t.Helper()
	return hostContainerIn(t, e, vmID, id, layer, sub, nil)
}

// hostContainerIn is hostContainer with the container's Networking.
func hostContainerIn(t *testing.T, e *Engine, vmID, id, layer string, sub Subscriber, net *schema2.Networking) (string, error) {
	t.Helper()
	return hostContainerWith(t, e, vmID, id, layer, sub, func(c *schema2.Container) { c.Networking = net })
}

// hostContainerWith is hostContainer with edit applied to the container's document.
func hostContainerWith(t *testing.T, e *Engine, vmID, id, layer string, sub Subscriber, edit func(*schema2.Container)) (string, error) {
	t.Helper()
	scratch := t.TempDir()
	if err := os.Mkdir(filepath.Join(scratch, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, storage.ScratchDisk), emuvhdx.Encode(20<<30, "."), 0o644); err != nil {
		t.Fatal(err)
	}
	share := "s" + strings.ReplaceAll(id, "-", "")
	if err := modify(e, vmID, schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.VirtualSmbShare{Name: share, Path: layer, Options: &schema2.VirtualSmbShareOptions{ReadOnly: true}}}); err != nil {
		t.Fatalf("add share: %v", err)
	}
	mount := `C:\mounts\scsi\` + id
	lun := 1 + len(e.systems)
	if err := modify(e, vmID, schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathSCSIFormat, ctrl0, lun), RequestType: schema2.RequestTypeAdd,
		Settings:     schema2.Attachment{Type: "VirtualDisk", Path: filepath.Join(scratch, storage.ScratchDisk)},
		GuestRequest: schema2.GuestModifySettingRequest{ResourceType: schema2.ResourceTypeMappedVirtualDisk, RequestType: schema2.RequestTypeAdd, Settings: schema2.MappedVirtualDisk{ContainerPath: mount, Lun: uint8(lun)}}}); err != nil {
		t.Fatalf("attach scratch: %v", err)
	}
	layers := []schema2.Layer{{Id: "1", Path: schema2.VSMBGuestPath(share)}}
	if err := modify(e, vmID, schema2.ModifySettingRequest{GuestRequest: schema2.GuestModifySettingRequest{ResourceType: schema2.ResourceTypeCombinedLayers, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.CombinedLayers{ContainerRootPath: mount, Layers: layers}}}); err != nil {
		t.Fatalf("combine layers: %v", err)
	}
	c := &schema2.Container{Storage: &schema2.Storage{Path: mount, Layers: layers}}
	edit(c)
	doc, _ := json.Marshal(schema2.ComputeSystem{Owner: "test", SchemaVersion: &schema2.SchemaV21, HostingSystemId: vmID,
		HostedSystem: schema2.HostedSystem{SchemaVersion: &schema2.SchemaV21, Container: c}})
	if _, err := e.CreateSystem(context.Background(), id, string(doc), sub); err != nil {
		return scratch, err
	}
	return scratch, e.Start(context.Background(), wire.SystemRef{ID: id}, "")
}

func TestHostedContainersAndCrash(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	vmSub, _ := startVM(t, e, "p@vm", "10.0.20348.1", 128)
	older := newLayer(t, "10.0.17763.1", false)
	cSub := newRecorder()
	scratch, err := hostContainer(t, e, "p@vm", "c1", older, cSub)
	if err != nil {
		t.Fatalf("hosted container of an older image: %v", err)
	}
	// It runs in the VM, and the VM's memory bounds it. (A container ends with its last process:
	// one keeps it up.)
	keep := runInBackground(t, e, "c1", `C:\workload\workload.exe sleep 600`)
	if code, out := runIn(t, e, "c1", `C:\workload\workload.exe echo hosted`); code != 0 || strings.TrimSpace(out) != "hosted" {
		t.Errorf("echo in the hosted container: exit %d %q", code, out)
	}
	if code, out := runIn(t, e, "c1", `C:\workload\workload.exe alloc 256`); code == 0 || strings.Contains(out, "allocated") {
		t.Errorf("alloc 256 in a container of a 128 MB VM: exit %d, %q; want it killed", code, out)
	}
	// What it writes lands in its scratch, the disk attached on SCSI.
	if code, _ := runIn(t, e, "c1", `C:\workload\workload.exe write C:\out\x.txt written`); code != 0 {
		t.Errorf("write in the hosted container: exit %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "Files", "out", "x.txt")); err != nil || string(b) != "written" {
		t.Errorf("the container's write is not in its scratch: %q, %v", b, err)
	}
	// The VM's process list holds the container's processes (its PID namespace is the VM's)
	// and nothing of the host.
	_, vmList := runIn(t, e, "p@vm", `C:\workload\workload.exe ps`)
	if lines := strings.Split(strings.TrimSpace(vmList), "\n"); len(lines) != 3 || lines[0] != "1 hcsemu-vm-init" || !strings.Contains(vmList, "workload.exe") {
		t.Errorf("the VM lists %q, want its init, the container's sleeper and ps", lines)
	}

	// A folder shared into the VM maps into the running container (its HostPath is the VM's
	// VSMB path), read-only as the share is; a host path that is not the VM's is refused.
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "f.txt"), []byte("from the host"), 0o644)
	if err := modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.VirtualSmbShare{Name: "data", Path: data, Options: &schema2.VirtualSmbShareOptions{ReadOnly: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := modify(e, "c1", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.MappedDirectory{HostPath: data, ContainerPath: `C:\data`}}); !errors.Is(err, computecore.E_INVALIDARG) {
		t.Errorf("mapping a host path the VM does not share: %v, want E_INVALIDARG", err)
	}
	if err := modify(e, "c1", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.MappedDirectory{HostPath: schema2.VSMBGuestPath("data"), ContainerPath: `C:\data`}}); err != nil {
		t.Fatalf("mapping a VSMB share: %v", err)
	}
	if code, out := runIn(t, e, "c1", `C:\workload\workload.exe read C:\data\f.txt`); code != 0 || out != "from the host" {
		t.Errorf("read through the mapping: exit %d %q", code, out)
	}
	if code, _ := runIn(t, e, "c1", `C:\workload\workload.exe write C:\data\g.txt x`); code == 0 {
		t.Error("wrote through a read-only share")
	}
	if err := modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeRemove, Settings: map[string]string{"Name": "data"}}); !errors.Is(err, hresult.ErrBusy) {
		t.Errorf("removing a share mapped into a container: %v, want ERROR_BUSY", err)
	}

	// A single file, as hcsshim maps file mounts: a RestrictFileAccess share of its folder
	// serves only its AllowedFiles, and an Update can allow more.
	os.WriteFile(filepath.Join(data, "g.txt"), []byte("second"), 0o644)
	single := schema2.VirtualSmbShare{Name: "one", Path: data, AllowedFiles: []string{"f.txt"},
		Options: &schema2.VirtualSmbShareOptions{ReadOnly: true, RestrictFileAccess: true, SingleFileMapping: true}}
	if err := modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeAdd, Settings: single}); err != nil {
		t.Fatal(err)
	}
	mapFile := func(name, to string) error {
		return modify(e, "c1", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories, RequestType: schema2.RequestTypeAdd,
			Settings: schema2.MappedDirectory{HostPath: schema2.VSMBGuestPath("one") + `\` + name, ContainerPath: to, ReadOnly: true}})
	}
	if err := mapFile("f.txt", `C:\config\f.txt`); err != nil {
		t.Fatalf("map an allowed file: %v", err)
	}
	if code, out := runIn(t, e, "c1", `C:\workload\workload.exe read C:\config\f.txt`); code != 0 || out != "from the host" {
		t.Errorf("read the mapped file: exit %d %q", code, out)
	}
	if err := mapFile("g.txt", `C:\config\g.txt`); !errors.Is(err, computecore.E_ACCESSDENIED) {
		t.Errorf("map a file the share does not allow: %v, want E_ACCESSDENIED", err)
	}
	single.AllowedFiles = []string{"f.txt", "g.txt"}
	if err := modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeUpdate, Settings: single}); err != nil {
		t.Fatalf("allow a second file: %v", err)
	}
	if err := mapFile("g.txt", `C:\config\g.txt`); err != nil {
		t.Errorf("map a file allowed by an Update: %v", err)
	}

	// What the container uses cannot be removed under it.
	err = modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeRemove, Settings: map[string]string{"Name": "sc1"}})
	if !errors.Is(err, hresult.ErrBusy) {
		t.Errorf("removing a share in use: %v, want ERROR_BUSY", err)
	}

	// A newer image than the VM's does not run in it.
	newer := newLayer(t, "10.0.26100.1", false)
	if _, err := hostContainer(t, e, "p@vm", "c2", newer, newRecorder()); !errors.Is(err, computecore.HCS_E_IMAGE_MISMATCH) {
		t.Errorf("hosted container of a newer image: %v, want HCS_E_IMAGE_MISMATCH", err)
	}

	// A crash ends everything: both systems exit with UnexpectedExit.
	if err := e.Crash(context.Background(), "p@vm"); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		r  *recorder
		id string
	}{{vmSub, "p@vm"}, {cSub, "c1"}} {
		st := x.r.exited(t, x.id)
		if st.ExitType != schema2.NotificationUnexpectedExit || uint32(st.Status) != uint32(computecore.HCS_E_UNEXPECTED_EXIT) {
			t.Errorf("%s exit %+v, want UnexpectedExit with HCS_E_UNEXPECTED_EXIT", x.id, st)
		}
	}
	select {
	case <-keep:
	case <-time.After(60 * time.Second):
		t.Error("the process in the hosted container outlived its VM")
	}
}

// runInBackground starts a command line and returns a channel closed when it exits.
func runInBackground(t *testing.T, e *Engine, id, cmdline string) <-chan struct{} {
	t.Helper()
	sub := newRecorder()
	params, _ := json.Marshal(schema2.ProcessParameters{CommandLine: cmdline})
	r, _, err := e.CreateProcess(context.Background(), wire.SystemRef{ID: id}, string(params), sub)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range sub.more {
			sub.mu.Lock()
			for _, ev := range sub.events {
				if ev.Type == computecore.EventProcessExited && ev.PID == r.PID {
					sub.mu.Unlock()
					return
				}
			}
			sub.mu.Unlock()
		}
	}()
	return done
}

func TestVMBudgetAndBuilds(t *testing.T) {
	e := newVMEngine(t, "10.0.17763.1", 200)
	startVM(t, e, "a@vm", "10.0.17763.1", 128)

	// 128 + 128 MB do not fit in a 200 MB host; the refused VM stays Created and can start
	// once the first is gone.
	layer := newLayer(t, "10.0.17763.1", true)
	if _, err := e.CreateSystem(context.Background(), "b@vm", vmDocument(layer, newDisk(t), 128, 1), newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: "b@vm"}, ""); !errors.Is(err, computecore.E_OUTOFMEMORY) {
		t.Fatalf("second VM beyond the host's memory: %v, want E_OUTOFMEMORY", err)
	}
	if err := e.Terminate(context.Background(), wire.SystemRef{ID: "a@vm"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: "b@vm"}, ""); err != nil {
		t.Fatalf("start once memory is free: %v", err)
	}

	// A VM of a newer build than the host does not boot.
	newer := newLayer(t, "10.0.20348.1", true)
	if _, err := e.CreateSystem(context.Background(), "n@vm", vmDocument(newer, newDisk(t), 64, 1), newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: "n@vm"}, ""); !errors.Is(err, computecore.HCS_E_IMAGE_MISMATCH) {
		t.Errorf("VM newer than the host: %v, want HCS_E_IMAGE_MISMATCH", err)
	}

	// Without its boot manager a VM does not start.
	noBoot := newLayer(t, "10.0.17763.1", false)
	if _, err := e.CreateSystem(context.Background(), "x@vm", vmDocument(noBoot, newDisk(t), 64, 1), newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: "x@vm"}, ""); !errors.Is(err, computecore.HCS_E_TERMINATED_DURING_START) {
		t.Errorf("VM without boot files: %v, want HCS_E_TERMINATED_DURING_START", err)
	}

	// Process isolation runs only images of a build the host accepts (a 2016 image on this
	// engine's host is refused; the table is TestProcessIsolationRuns).
	older := filepath.Join(newLayer(t, "10.0.14393.1", false), "Files")
	doc := `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"` + older + `"}}}`
	if _, err := e.CreateSystem(context.Background(), "proc", doc, newRecorder()); !errors.Is(err, computecore.HCS_E_IMAGE_MISMATCH) {
		t.Errorf("process-isolated container of another build: %v, want HCS_E_IMAGE_MISMATCH", err)
	}
	if n := e.systemCount(); n != 4 {
		t.Errorf("%d systems; the refused container must leave nothing", n)
	}
}

func TestVMFaultsAndHandles(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	layer := newLayer(t, "10.0.20348.1", true)
	if err := e.vmFaults.set("g@vm", 0, computecore.HCS_E_CONNECTION_TIMEOUT); err != nil {
		t.Fatal(err)
	}
	sub := newRecorder()
	if _, err := e.CreateSystem(context.Background(), "g@vm", vmDocument(layer, newDisk(t), 64, 1), sub); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), wire.SystemRef{ID: "g@vm"}, ""); !errors.Is(err, computecore.HCS_E_CONNECTION_TIMEOUT) {
		t.Fatalf("start with a failing guest connection: %v, want HCS_E_CONNECTION_TIMEOUT", err)
	}
	if used := e.vmHost.usedMB; used != 0 {
		t.Errorf("a VM that failed to start still holds %d MB of the budget", used)
	}
	e.vmFaults.set("g@vm", 0, 0)
	if err := e.Start(context.Background(), wire.SystemRef{ID: "g@vm"}, ""); err != nil {
		t.Fatalf("start once the fault is gone: %v", err)
	}
	// Closing the last handle terminates a VM with ShouldTerminateOnLastHandleClosed: with no
	// handle left it is gone at once, its memory back in the budget.
	e.CloseSystem(context.Background(), wire.SystemRef{ID: "g@vm"}, sub)
	if _, err := e.Properties(context.Background(), wire.SystemRef{ID: "g@vm"}, ""); !errors.Is(err, computecore.HCS_E_SYSTEM_NOT_FOUND) {
		t.Errorf("after its last handle closed the VM is still there: %v", err)
	}
	if used := e.vmHost.usedMB; used != 0 {
		t.Errorf("a terminated VM still holds %d MB of the budget", used)
	}

	// A slow boot: the start waits (here until its caller gives up) and the VM stays Created.
	if _, err := e.CreateSystem(context.Background(), "slow@vm", vmDocument(layer, newDisk(t), 64, 1), newRecorder()); err != nil {
		t.Fatal(err)
	}
	if err := e.vmFaults.set("*", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.Start(ctx, wire.SystemRef{ID: "slow@vm"}, ""); !errors.Is(err, computecore.E_CANCELLED) {
		t.Errorf("start during a boot delay, cancelled: %v, want E_CANCELLED", err)
	}
	e.vmFaults.set("*", 0, 0)
	if err := e.Start(context.Background(), wire.SystemRef{ID: "slow@vm"}, ""); err != nil {
		t.Errorf("start after the delay was cleared: %v", err)
	}
}

func TestVMModify(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	startVM(t, e, "m@vm", "10.0.20348.1", 64)
	disk, dir := newDisk(t), t.TempDir()
	scsi := func(lun int) string { return fmt.Sprintf(schema2.ResourcePathSCSIFormat, ctrl0, lun) }
	tests := []struct {
		name string
		req  string
		hr   computecore.HRESULT
		msg  string
	}{
		{"attach", `{"ResourcePath":"` + scsi(5) + `","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"` + disk + `"}}`, 0, ""},
		{"occupied LUN", `{"ResourcePath":"` + scsi(5) + `","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"` + disk + `"}}`, errAlreadyExists, "LUN 5"},
		{"LUN 64", `{"ResourcePath":"` + scsi(64) + `","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"` + disk + `"}}`, computecore.E_INVALIDARG, `LUN "64"`},
		{"unknown controller", `{"ResourcePath":"VirtualMachine/Devices/Scsi/x/Attachments/1","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"` + disk + `"}}`, computecore.E_INVALIDARG, `controller "x"`},
		{"not a disk", `{"ResourcePath":"` + scsi(6) + `","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"/etc/hostname"}}`, computecore.E_INVALIDARG, "Settings.Path"},
		{"detach", `{"ResourcePath":"` + scsi(5) + `","RequestType":"Remove"}`, 0, ""},
		{"detach nothing", `{"ResourcePath":"` + scsi(5) + `","RequestType":"Remove"}`, hresult.ErrNotFound, "nothing is attached"},
		{"share", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Add","Settings":{"Name":"s1","Path":"` + dir + `"}}`, 0, ""},
		{"duplicate share", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Add","Settings":{"Name":"S1","Path":"` + dir + `"}}`, errAlreadyExists, `"S1"`},
		{"share of nothing", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Add","Settings":{"Name":"s2","Path":"/nonexistent"}}`, computecore.E_PATH_NOT_FOUND, "Settings.Path"},
		{"update an unrestricted share", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Update","Settings":{"Name":"s1","AllowedFiles":["a"]}}`, computecore.E_INVALIDARG, "RestrictFileAccess"},
		{"map a share in the guest", `{"GuestRequest":{"ResourceType":"MappedDirectory","RequestType":"Add","Settings":{"HostPath":"` + strings.ReplaceAll(schema2.VSMBGuestPath("s1"), `\`, `\\`) + `","ContainerPath":"C:\\share"}}}`, 0, ""},
		{"remove a mapped share", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Remove","Settings":{"Name":"s1"}}`, hresult.ErrBusy, "in use"},
		{"guest request with an unknown field", `{"GuestRequest":{"ResourcePType":"MappedDirectory"}}`, computecore.HCS_E_INVALID_JSON, "GuestRequest.ResourcePType: unknown field"},
		{"remove the boot share", `{"ResourcePath":"VirtualMachine/Devices/VirtualSmb/Shares","RequestType":"Remove","Settings":{"Name":"os"}}`, hresult.ErrBusy, "boots"},
		{"pipe", `{"ResourcePath":"VirtualMachine/Devices/MappedPipes/\\\\.\\pipe\\p1","RequestType":"Add"}`, 0, ""},
		{"pipe twice", `{"ResourcePath":"VirtualMachine/Devices/MappedPipes/\\\\.\\pipe\\P1","RequestType":"Add"}`, errAlreadyExists, "already mapped"},
		{"not a pipe", `{"ResourcePath":"VirtualMachine/Devices/MappedPipes/p1","RequestType":"Add"}`, computecore.E_INVALIDARG, "host pipe path"},
		{"memory", `{"ResourcePath":"VirtualMachine/ComputeTopology/Memory/SizeInMB","Settings":96}`, 0, ""},
		{"no memory", `{"ResourcePath":"VirtualMachine/ComputeTopology/Memory/SizeInMB","Settings":0}`, computecore.E_INVALIDARG, "0 MB"},
		{"cpu limits", `{"ResourcePath":"VirtualMachine/ComputeTopology/Processor/Limits","Settings":{"Limit":50000,"Weight":200}}`, 0, ""},
		{"cpu limit too high", `{"ResourcePath":"VirtualMachine/ComputeTopology/Processor/Limits","Settings":{"Limit":100001}}`, computecore.E_INVALIDARG, "Settings.Limit"},
		{"NIC of a malformed endpoint id", `{"ResourcePath":"VirtualMachine/Devices/NetworkAdapters/n1","RequestType":"Add","Settings":{"EndpointId":"e"}}`, computecore.HRESULT(computenetwork.HCN_E_GUID_CONVERSION_FAILURE), "Settings.EndpointId"},
		{"NIC of an unknown endpoint", `{"ResourcePath":"VirtualMachine/Devices/NetworkAdapters/n1","RequestType":"Add","Settings":{"EndpointId":"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"}}`, computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "Settings.EndpointId"},
		{"remove an absent NIC", `{"ResourcePath":"VirtualMachine/Devices/NetworkAdapters/n1","RequestType":"Remove"}`, hresult.ErrNotFound, "no such NIC"},
		{"guest NIC before its namespace", `{"GuestRequest":{"ResourceType":"Network","RequestType":"Add","Settings":{"AdapterId":"n1","RequestType":"PreAdd","Settings":{"ID":"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"}}}}`, hresult.ErrNotFound, "no network namespace"},
		{"guest namespace without an id", `{"GuestRequest":{"ResourceType":"NetworkNamespace","RequestType":"Add","Settings":{"Type":"Host"}}}`, computecore.HCS_E_INVALID_JSON, "GuestRequest.Settings.ID"},
		{"guest NIC request with an unknown field", `{"GuestRequest":{"ResourceType":"Network","RequestType":"Add","Settings":{"AdapterInstanceId":"n1"}}}`, computecore.HCS_E_INVALID_JSON, "AdapterInstanceId"},
		{"unknown path", `{"ResourcePath":"VirtualMachine/Devices/Floppy","RequestType":"Add"}`, computecore.E_INVALIDARG, "Floppy"},
		{"mount an empty LUN", `{"GuestRequest":{"ResourceType":"MappedVirtualDisk","RequestType":"Add","Settings":{"ContainerPath":"C:\\m","Lun":9}}}`, hresult.ErrNotFound, "LUN 9"},
		{"layers on no disk", `{"GuestRequest":{"ResourceType":"CombinedLayers","RequestType":"Add","Settings":{"ContainerRootPath":"C:\\m","Layers":[{"Id":"1","Path":"x"}]}}}`, computecore.E_PATH_NOT_FOUND, "no disk is mounted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Modify(context.Background(), wire.SystemRef{ID: "m@vm"}, tt.req)
			if tt.hr == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.hr) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want %v naming %q", err, tt.hr, tt.msg)
			}
		})
	}
	// The limits are the VM cgroup's: 96 MB of memory, and one processor at Limit 50000 (half
	// of it) is half a CFS period.
	s, err := e.lookup(wire.SystemRef{ID: "m@vm"})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := s.cg.read("memory", "memory.limit_in_bytes")
	quota, _ := s.cg.read("cpu", "cpu.cfs_quota_us")
	shares, _ := s.cg.read("cpu", "cpu.shares")
	s.mu.Unlock()
	if mem != fmt.Sprint(96<<20) || quota != fmt.Sprint(cfsPeriodUs/2) || shares != "200" {
		t.Errorf("VM cgroup: memory %s, quota %s, shares %s; want %d, %d, 200", mem, quota, shares, 96<<20, cfsPeriodUs/2)
	}
	// The guest sees the mapped share; the memory resize shows in Memory.
	if code, out := runIn(t, e, "m@vm", `C:\workload\workload.exe pwd`); code != 0 || out == "" {
		t.Errorf("pwd in the VM: %d %q", code, out)
	}
	props, _ := e.Properties(context.Background(), wire.SystemRef{ID: "m@vm"}, `{"PropertyTypes":["Memory"]}`)
	if !strings.Contains(props, fmt.Sprintf(`"AssignedMemory":%d`, 96<<20/4096)) {
		t.Errorf("after a resize to 96 MB: %s", props)
	}
}
