package uvm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/protocols/options"
)

var update = flag.Bool("update", false, "rewrite the golden documents in testdata/")

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (run with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func u64(v uint64) *uint64 { return &v }

// TestDocument checks the VM document against golden documents: hcsshim's defaults, and each
// way of overriding them, in their order (annotation > runtime option > spec > default).
func TestDocument(t *testing.T) {
	tests := []struct {
		name  string
		annot map[string]string
		opts  *options.Options
		res   *specs.WindowsResources
		host  uint32
		disk  string
	}{
		{name: "default", host: 8},
		{name: "one-cpu-host", host: 1},
		{name: "runtime-options", opts: &options.Options{VmProcessorCount: 4, VmMemorySizeInMb: 2047}, host: 8, disk: `C:\snapshots\1\vm\sandbox.vhdx`},
		{name: "annotations", annot: map[string]string{
			oci.AnnotationVMMemorySizeInMB:        "3000",
			oci.AnnotationVMProcessorCount:        "16",
			oci.AnnotationVMProcessorLimit:        "50000",
			oci.AnnotationVMProcessorWeight:       "200",
			oci.AnnotationVMFullyPhysicallyBacked: "true",
		}, opts: &options.Options{VmProcessorCount: 4, VmMemorySizeInMb: 2048}, host: 8},
		{name: "spec-resources", res: &specs.WindowsResources{
			Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)},
			CPU:    &specs.WindowsCPUResources{Count: u64(1)},
		}, host: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &specs.Spec{Annotations: tc.annot, Windows: &specs.Windows{Resources: tc.res}}
			size, err := oci.VMSizing(s, tc.opts, tc.host)
			if err != nil {
				t.Fatalf("VMSizing: %v", err)
			}
			o := &Options{ID: VMID("pod1"), Owner: "containerd-shim-runhcs-v1", VMSize: size}
			o.BootLayer = filepath.FromSlash("/layers/pause-base")
			o.ScratchDisk = tc.disk
			got, err := json.MarshalIndent(o.Document(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			// The boot files' path is spelled per OS; the golden documents hold a placeholder.
			bootFiles, _ := json.Marshal(o.BootFiles())
			got = bytes.ReplaceAll(got, bootFiles, []byte(`"<pause layer>/UtilityVM/Files"`))
			golden(t, filepath.Join("testdata", "vm-"+tc.name+".json"), append(got, '\n'))
		})
	}
}

func TestFindBootLayer(t *testing.T) {
	dir := t.TempDir()
	app, pause, base := filepath.Join(dir, "app"), filepath.Join(dir, "pause"), filepath.Join(dir, "base")
	for _, d := range []string{filepath.Join(app, "Files"), filepath.Join(pause, "UtilityVM", "Files", "EFI", "Microsoft", "Boot"), filepath.Join(base, "UtilityVM", "Files", "EFI", "Microsoft", "Boot")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := FindBootLayer([]string{app, pause, base}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "bootmgfw.efi") {
		t.Fatalf("FindBootLayer without a boot manager: %v, want FailedPrecondition naming it", err)
	}
	for _, l := range []string{pause, base} {
		if err := os.WriteFile(filepath.Join(l, "UtilityVM", "Files", "EFI", "Microsoft", "Boot", "bootmgfw.efi"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := FindBootLayer([]string{app, pause, base})
	if err != nil || got != pause {
		t.Errorf("FindBootLayer = %q, %v; want the uppermost layer with UtilityVM, %q", got, err, pause)
	}
	if _, err := FindBootLayer([]string{app}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "UtilityVM") {
		t.Errorf("FindBootLayer without UtilityVM: %v", err)
	}
}

func startVM(t *testing.T) (*VM, *fakeSystem) {
	t.Helper()
	size, err := oci.VMSizing(&specs.Spec{}, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{ID: VMID("pod"), Owner: "owner", VMSize: size, BootLayer: "/l/base", ScratchDisk: "/s/vm"}
	h := &fakeHost{}
	vm, err := Create(context.Background(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	if vm.ID() != "pod@vm" {
		t.Errorf("VM id %q, want pod@vm", vm.ID())
	}
	if _, err := vm.AddShare(context.Background(), "/x", true, true); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("AddShare before Start: %v, want FailedPrecondition", err)
	}
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return vm, h.sys
}

// TestStorageSharedLayers: two containers with a common base layer share its VSMB share; each
// gets its own scratch LUN (LUN 0 is the VM's); release goes in reverse order and the common
// share goes only with its last user.
func TestStorageSharedLayers(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	a, err := vm.MountLayers(ctx, []string{"/l/app1", "/l/base"}, "/s/c1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := vm.MountLayers(ctx, []string{"/l/app2", "/l/base"}, "/s/c2")
	if err != nil {
		t.Fatal(err)
	}
	if n := vm.ShareRefs("/l/base", true); n != 2 {
		t.Errorf("base share refs = %d, want 2", n)
	}
	if a.scratch.LUN != 1 || b.scratch.LUN != 2 || a.Path != `c:\mounts\scsi\m0` || b.Path != `c:\mounts\scsi\m1` {
		t.Errorf("scratches at LUN %d (%s) and %d (%s), want 1 (m0) and 2 (m1)", a.scratch.LUN, a.Path, b.scratch.LUN, b.Path)
	}
	if a.Layers[1].Path != b.Layers[1].Path || a.Layers[0].Path == b.Layers[0].Path {
		t.Errorf("layer paths %v and %v: want the base shared, the app layers not", a.Layers, b.Layers)
	}
	if !strings.HasPrefix(a.Layers[0].Path, schema2.VSMBGuestPathPrefix+"s") {
		t.Errorf("layer path %q is not a VSMB guest path", a.Layers[0].Path)
	}
	want := []string{
		"Add VirtualMachine/Devices/VirtualSmb/Shares", // app1
		"Add VirtualMachine/Devices/VirtualSmb/Shares", // base
		"Add VirtualMachine/Devices/Scsi/" + SCSIController + "/Attachments/1",
		"Add guest MappedVirtualDisk",
		"Add guest CombinedLayers",
		"Add VirtualMachine/Devices/VirtualSmb/Shares", // app2; base is reused
		"Add VirtualMachine/Devices/Scsi/" + SCSIController + "/Attachments/2",
		"Add guest MappedVirtualDisk",
		"Add guest CombinedLayers",
	}
	if got := sys.calls(); !slices.Equal(got, want) {
		t.Fatalf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	n := len(sys.calls())
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantRelease := []string{
		"Remove guest CombinedLayers",
		"Remove guest MappedVirtualDisk",
		"Remove VirtualMachine/Devices/Scsi/" + SCSIController + "/Attachments/1",
		"Remove VirtualMachine/Devices/VirtualSmb/Shares", // app1 only: base is b's too
	}
	if got := sys.calls()[n:]; !slices.Equal(got, wantRelease) {
		t.Errorf("release requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRelease, "\n"))
	}
	if err := a.Release(ctx); err != nil || len(sys.calls()) != n+len(wantRelease) {
		t.Errorf("second Release: %v, %d more requests; want a no-op", err, len(sys.calls())-n-len(wantRelease))
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if vm.shares.len() != 0 || vm.disks.len() != 0 {
		t.Errorf("left after both released: %d shares, %d disks", vm.shares.len(), vm.disks.len())
	}
	// A freed LUN is reused.
	c, err := vm.MountLayers(ctx, []string{"/l/base"}, "/s/c3")
	if err != nil || c.scratch.LUN != 1 {
		t.Errorf("third container: %v, LUN %d, want LUN 1 again", err, c.scratch.LUN)
	}
}

// TestStorageUndo: a failure half way releases what was made, in reverse order.
func TestStorageUndo(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	sys.failOn = map[string]error{"Add guest CombinedLayers": errors.New("guest says no")}
	if _, err := vm.MountLayers(ctx, []string{"/l/app", "/l/base"}, "/s/c1"); err == nil || !strings.Contains(err.Error(), "guest says no") {
		t.Fatalf("MountLayers: %v, want the guest's error", err)
	}
	got := sys.calls()
	want := []string{
		"Add VirtualMachine/Devices/VirtualSmb/Shares",
		"Add VirtualMachine/Devices/VirtualSmb/Shares",
		"Add VirtualMachine/Devices/Scsi/" + SCSIController + "/Attachments/1",
		"Add guest MappedVirtualDisk",
		"Remove guest MappedVirtualDisk",
		"Remove VirtualMachine/Devices/Scsi/" + SCSIController + "/Attachments/1",
		"Remove VirtualMachine/Devices/VirtualSmb/Shares",
		"Remove VirtualMachine/Devices/VirtualSmb/Shares",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if vm.shares.len() != 0 || vm.disks.len() != 0 {
		t.Errorf("left: %d shares, %d disks", vm.shares.len(), vm.disks.len())
	}
}

// TestReleaseAfterVMExit: once the VM is gone, releases succeed without HCS (hcsshim#2743).
func TestReleaseAfterVMExit(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	st, err := vm.MountLayers(ctx, []string{"/l/base"}, "/s/c1")
	if err != nil {
		t.Fatal(err)
	}
	n := len(sys.calls())
	sys.crash()
	if err := st.Release(ctx); err != nil {
		t.Fatalf("Release after the VM exited: %v", err)
	}
	if len(sys.calls()) != n {
		t.Errorf("Release made %d HCS requests on a gone VM", len(sys.calls())-n)
	}
	if vm.shares.len() != 0 || vm.disks.len() != 0 {
		t.Errorf("left: %d shares, %d disks", vm.shares.len(), vm.disks.len())
	}
	if _, err := vm.AddShare(ctx, "/x", true, false); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("AddShare on a stopped VM: %v, want FailedPrecondition", err)
	}
}

// TestLUNExhaustion: 63 disks besides the VM's scratch fit; the 64th is refused.
func TestLUNExhaustion(t *testing.T) {
	ctx := context.Background()
	vm, _ := startVM(t)
	for i := 1; i < lunsPerController; i++ {
		if _, err := vm.AddDisk(ctx, filepath.Join("/d", string(rune('a'+i%26)), strings.Repeat("x", i))); err != nil {
			t.Fatalf("disk %d: %v", i, err)
		}
	}
	if _, err := vm.AddDisk(ctx, "/d/one-too-many"); !errdefs.IsResourceExhausted(err) {
		t.Errorf("65th disk: %v, want ResourceExhausted", err)
	}
}

func TestFilesAndPipes(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	file := filepath.FromSlash("/host/etc/config.ini")
	f, err := vm.AddFile(ctx, file, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(f.GuestPath, `\config.ini`) || f.HostPath != filepath.Dir(file) {
		t.Errorf("file share %+v", f)
	}
	var share schema2.VirtualSmbShare
	if err := json.Unmarshal([]byte(sys.docs[0]), &share); err != nil {
		t.Fatal(err)
	}
	if !share.Options.RestrictFileAccess || !share.Options.SingleFileMapping || !slices.Equal(share.AllowedFiles, []string{"config.ini"}) {
		t.Errorf("file share settings %s", sys.docs[0])
	}
	p1, err := vm.AddPipe(ctx, `\\.\pipe\docker_engine`)
	if err != nil {
		t.Fatal(err)
	}
	if p1 != schema2.VSMBGuestPipePath("docker_engine") {
		t.Errorf("pipe guest path %q", p1)
	}
	if _, err := vm.AddPipe(ctx, `\\.\pipe\docker_engine`); err != nil {
		t.Fatal(err)
	}
	if got := sys.calls(); len(got) != 2 || got[1] != `Add VirtualMachine/Devices/MappedPipes/\\.\pipe\docker_engine` || sys.docs[1] != "null" {
		t.Errorf("requests %q, settings %q: want one pipe Add without settings", got, sys.docs)
	}
	if _, err := vm.AddPipe(ctx, `C:\not-a-pipe`); !errdefs.IsInvalidArgument(err) {
		t.Errorf("AddPipe of a path: %v", err)
	}
	for range 2 {
		if err := vm.ReleasePipe(ctx, `\\.\pipe\docker_engine`); err != nil {
			t.Fatal(err)
		}
	}
	if got := sys.calls(); len(got) != 3 || !strings.HasPrefix(got[2], "Remove ") {
		t.Errorf("requests %q: want the pipe removed once, with its last user", got)
	}
}

func TestStats(t *testing.T) {
	vm, sys := startVM(t)
	sys.props = &schema2.Properties{
		Statistics: &schema2.Statistics{Processor: &schema2.ProcessorStats{TotalRuntime100ns: 7}},
		Memory: &schema2.MemoryInformationForVM{VirtualNodeCount: 1, VirtualMachineMemory: &schema2.VMMemory{
			AssignedMemory: 256, AvailableMemory: 100,
		}},
	}
	st, err := vm.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.GetProcessor().GetTotalRuntimeNs() != 700 || st.GetMemory().GetWorkingSetBytes() != 256*4096 ||
		st.GetMemory().GetVmMemory().GetAssignedMemory() != 256 || st.GetMemory().GetVirtualNodeCount() != 1 {
		t.Errorf("stats %v", st)
	}
}

// TestHvSocketService: a service entry is an Update at its ServiceTable path with the service's
// config (HCS has no Add there), and a Remove; a bad id is refused before HCS; with the VM gone
// the Remove needs no HCS call.
func TestHvSocketService(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	const id = "6f5a2c11-7a3e-4f0e-9a57-3c1d2b0e4f10"
	cfg := &schema2.HvSocketServiceConfig{BindSecurityDescriptor: "D:P(A;;FA;;;SY)", ConnectSecurityDescriptor: "D:P(A;;FA;;;SY)"}
	if err := vm.AddHvSocketService(ctx, id, cfg); err != nil {
		t.Fatal(err)
	}
	path := "VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/" + id
	if got := sys.calls(); len(got) != 1 || got[0] != "Update "+path || sys.docs[0] != `{"BindSecurityDescriptor":"D:P(A;;FA;;;SY)","ConnectSecurityDescriptor":"D:P(A;;FA;;;SY)"}` {
		t.Errorf("requests %q, settings %q: want one Update with the config", got, sys.docs)
	}
	if err := vm.AddHvSocketService(ctx, "ccg", cfg); !errdefs.IsInvalidArgument(err) {
		t.Errorf("a service id that is not a GUID: %v, want InvalidArgument", err)
	}
	if err := vm.RemoveHvSocketService(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := sys.calls(); len(got) != 2 || got[1] != "Remove "+path || sys.docs[1] != "null" {
		t.Errorf("requests %q, settings %q: want a Remove without settings", got, sys.docs)
	}
	sys.crash()
	if err := vm.RemoveHvSocketService(ctx, id); err != nil || len(sys.calls()) != 2 {
		t.Errorf("Remove on a gone VM: %v, %d requests", err, len(sys.calls()))
	}
}
