package compute

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// wineDosDevices makes a Wine prefix's dosdevices folder whose c: links to drive_c and z: to
// a folder standing for /, and returns the folder and the two drives' targets.
func wineDosDevices(t *testing.T) (dd, driveC, driveZ string) {
	t.Helper()
	prefix := t.TempDir()
	dd = filepath.Join(prefix, "dosdevices")
	driveC = filepath.Join(prefix, "drive_c")
	driveZ = filepath.Join(prefix, "root")
	for _, d := range []string{dd, driveC, driveZ} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../drive_c", filepath.Join(dd, "c:")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(driveZ, filepath.Join(dd, "z:")); err != nil {
		t.Fatal(err)
	}
	// EvalSymlinks spells the targets as resolve does (the temp folder may be a link).
	var err error
	if driveC, err = filepath.EvalSymlinks(driveC); err != nil {
		t.Fatal(err)
	}
	if driveZ, err = filepath.EvalSymlinks(driveZ); err != nil {
		t.Fatal(err)
	}
	return dd, driveC, driveZ
}

func TestHostPathsResolve(t *testing.T) {
	dd, driveC, driveZ := wineDosDevices(t)
	const volC = `\\?\Volume{00000000-0000-0000-0000-000000000043}\`
	hp, err := newHostPaths(wire.ClientPathsArgs{DosDevices: dd, Volumes: map[string]string{volC: "C"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		hp         *hostPaths
		want       string
		wantHR     computecore.HRESULT
		wantMsg    string
	}{
		{"linux path from a client without a mapping", "/srv/data", nil, "/srv/data", 0, ""},
		{"linux path from a client with one", "/srv/data", hp, "/srv/data", 0, ""},
		{"volume path left to the storage filter", `\\?\Volume{0f3c2a55-07a4-4c56-bd0c-4a3d7a0a5a10}\`, hp, `\\?\Volume{0f3c2a55-07a4-4c56-bd0c-4a3d7a0a5a10}\`, 0, ""},
		{"drive Z", `Z:\tmp\vol`, hp, filepath.Join(driveZ, "tmp", "vol"), 0, ""},
		{"drive C, lower case letter, forward slashes", `c:/ProgramData/containerd`, hp, filepath.Join(driveC, "ProgramData", "containerd"), 0, ""},
		{"device prefix", `\\?\C:\data\.\x`, hp, filepath.Join(driveC, "data", "x"), 0, ""},
		{"dot-dot inside the drive", `C:\a\..\b`, hp, filepath.Join(driveC, "b"), 0, ""},
		{"drive root", `Z:\`, hp, driveZ, 0, ""},
		{"the client's volume of drive C (as containerd's CRI plugin names a mount)", volC + `users\root\Temp\m`, hp, filepath.Join(driveC, "users", "root", "Temp", "m"), 0, ""},
		{"the client's volume of drive C, upper-case GUID, root", `\\?\Volume{00000000-0000-0000-0000-000000000043}`, hp, driveC, 0, ""},
		{"a volume the client did not name (the storage filter's)", `\\?\Volume{0f3c2a55-07a4-4c56-bd0c-4a3d7a0a5a10}\x`, hp, `\\?\Volume{0f3c2a55-07a4-4c56-bd0c-4a3d7a0a5a10}\x`, 0, ""},
		{"dot-dot above the root of a volume", volC + `..\..\etc`, hp, "", computecore.E_INVALIDARG, "climbs above the root of drive C:"},
		{"no mapping given", `Z:\tmp\vol`, nil, "", computecore.E_INVALIDARG, "no drive mapping"},
		{"drive the prefix has not", `Q:\data`, hp, "", computecore.E_PATH_NOT_FOUND, "drive Q: is not mapped"},
		{"dot-dot above the root", `C:\..\etc`, hp, "", computecore.E_INVALIDARG, "climbs above the root of drive C:"},
		{"dot-dot above the root later in the path", `Z:\a\..\..\etc\shadow`, hp, "", computecore.E_INVALIDARG, "climbs above the root of drive Z:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.hp.resolve("Container.MappedDirectories[0].HostPath", tt.path)
			if tt.wantHR != 0 {
				if !errors.Is(err, tt.wantHR) || !strings.Contains(err.Error(), tt.wantMsg) ||
					!strings.Contains(err.Error(), "Container.MappedDirectories[0].HostPath") {
					t.Fatalf("resolve(%q) = %q, %v; want %v naming the field and %q", tt.path, got, err, tt.wantHR, tt.wantMsg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("resolve(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}

func TestNewHostPathsRefusesBadFolders(t *testing.T) {
	for _, dd := range []string{"", "relative/dosdevices", t.TempDir(), filepath.Join(t.TempDir(), "dosdevices")} {
		if _, err := newHostPaths(wire.ClientPathsArgs{DosDevices: dd}); err == nil {
			t.Errorf("newHostPaths(%q) accepted it", dd)
		}
	}
	dd, _, _ := wineDosDevices(t)
	for _, vols := range []map[string]string{
		{`C:\`: "c"},
		{`\\?\Volume{00000000-0000-0000-0000-000000000043}\`: "cd"},
		{`\\?\Volume{00000000-0000-0000-0000-000000000043}\`: "1"},
	} {
		if _, err := newHostPaths(wire.ClientPathsArgs{DosDevices: dd, Volumes: vols}); !errors.Is(err, computecore.E_INVALIDARG) {
			t.Errorf("newHostPaths with volumes %q: %v, want E_INVALIDARG", vols, err)
		}
	}
}

// A compute system document's host paths resolve with the connection's mapping; a hosted
// container's (the VM's paths) are left alone, and without a mapping a Windows host path is
// an error naming the field.
func TestValidateComputeSystemResolvesHostPaths(t *testing.T) {
	dd, driveC, driveZ := wineDosDevices(t)
	if err := os.MkdirAll(filepath.Join(driveZ, "tmp", "vol"), 0o755); err != nil {
		t.Fatal(err)
	}
	hp, err := newHostPaths(wire.ClientPathsArgs{DosDevices: dd})
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"` + driveC + `"},` +
		`"MappedDirectories":[{"HostPath":"Z:\\tmp\\vol","ContainerPath":"C:\\data"}]}}`
	cs, err := validateComputeSystem(doc, 2, statDir, statDirOrFile, hp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cs.Container.MappedDirectories[0].HostPath, filepath.Join(driveZ, "tmp", "vol"); got != want {
		t.Errorf("HostPath = %q, want %q", got, want)
	}
	_, err = validateComputeSystem(doc, 2, statDir, statDirOrFile, nil)
	if !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(err.Error(), "Container.MappedDirectories[0].HostPath") {
		t.Errorf("without a mapping: %v, want E_INVALIDARG naming the field", err)
	}

	vm := &schema2.ComputeSystem{VirtualMachine: &schema2.VirtualMachine{Devices: &schema2.Devices{
		VirtualSmb: &schema2.VirtualSmb{Shares: []schema2.VirtualSmbShare{{Name: "s", Path: `C:\layers\1`}}},
		Scsi:       map[string]schema2.Scsi{"0": {Attachments: map[string]schema2.Attachment{"0": {Type: "VirtualDisk", Path: `Z:\tmp\vol\sandbox.vhdx`}}}},
	}}}
	if err := hp.resolveComputeSystem(vm); err != nil {
		t.Fatal(err)
	}
	if got, want := vm.VirtualMachine.Devices.VirtualSmb.Shares[0].Path, filepath.Join(driveC, "layers", "1"); got != want {
		t.Errorf("VirtualSmb.Shares[0].Path = %q, want %q", got, want)
	}
	if got, want := vm.VirtualMachine.Devices.Scsi["0"].Attachments["0"].Path, filepath.Join(driveZ, "tmp", "vol", "sandbox.vhdx"); got != want {
		t.Errorf("Scsi Attachments.0.Path = %q, want %q", got, want)
	}

	hosted := `{"SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"uvm","HostedSystem":{"SchemaVersion":{"Major":2,"Minor":1},` +
		`"Container":{"Storage":{"Path":"C:\\c"},"MappedDirectories":[{"HostPath":"C:\\guest\\dir","ContainerPath":"C:\\d"}]}}}`
	if _, err := validateComputeSystem(hosted, 2, nil, nil, nil); err != nil {
		t.Errorf("a hosted container's guest paths: %v", err)
	}
}

// rawCall sends one request on a raw connection and returns its response.
func rawCall(t *testing.T, c net.Conn, id uint64, method string, args any) *wire.Frame {
	t.Helper()
	f, err := wire.NewRequest(id, method, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteFrame(c, f); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := wire.ReadFrame(c)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if r.Event == nil && r.ID == id {
			return r
		}
	}
}

// TestDaemonClientPaths: a connection that sent ClientPaths has the Windows host paths of its
// documents resolved through its dosdevices folder (the mapped folder is bound into the
// container's volume at create); a second ClientPaths is refused; another connection, which
// gave no mapping, has the same document refused naming the field.
func TestDaemonClientPaths(t *testing.T) {
	d := startDaemon(t)
	dd, _, driveZ := wineDosDevices(t)
	host := filepath.Join(driveZ, "srv", "data")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "f.txt"), []byte("mapped"), 0o644); err != nil {
		t.Fatal(err)
	}
	dialRaw := func() net.Conn {
		c, err := net.Dial("unix", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	wine := dialRaw()
	if r := rawCall(t, wine, 1, wire.MethodClientPaths, wire.ClientPathsArgs{DosDevices: dd}); r.HResult != 0 {
		t.Fatalf("ClientPaths: %#x %s", uint32(r.HResult), r.Result)
	}
	r := rawCall(t, wine, 2, wire.MethodClientPaths, wire.ClientPathsArgs{DosDevices: dd})
	if !errors.Is(computecore.HRESULT(r.HResult), computecore.HCS_E_INVALID_STATE) {
		t.Errorf("a second ClientPaths: %#x %s, want HCS_E_INVALID_STATE", uint32(r.HResult), r.Result)
	}

	vol := t.TempDir()
	doc := containerConfig(vol, `,"MappedDirectories":[{"HostPath":"Z:\\srv\\data","ContainerPath":"C:\\mnt\\host","ReadOnly":true}]`)
	r = rawCall(t, wine, 3, wire.MethodCreateComputeSystem, wire.CreateSystemArgs{ID: "clientpaths", Configuration: doc})
	if r.HResult != 0 {
		t.Fatalf("CreateComputeSystem with Z:\\srv\\data: %#x %s", uint32(r.HResult), r.Result)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "mnt", "host", "f.txt")); err != nil || string(b) != "mapped" {
		t.Errorf("the mapped folder in the volume: %q, %v", b, err)
	}
	r = rawCall(t, wine, 4, wire.MethodTerminateComputeSystem, wire.SystemArgs{System: wire.SystemRef{ID: "clientpaths"}})
	if r.HResult != 0 {
		t.Errorf("Terminate: %#x %s", uint32(r.HResult), r.Result)
	}

	linux := dialRaw()
	r = rawCall(t, linux, 1, wire.MethodCreateComputeSystem, wire.CreateSystemArgs{ID: "clientpaths-none", Configuration: containerConfig(t.TempDir(),
		`,"MappedDirectories":[{"HostPath":"Z:\\srv\\data","ContainerPath":"C:\\mnt\\host"}]`)})
	if !errors.Is(computecore.HRESULT(r.HResult), computecore.E_INVALIDARG) || !strings.Contains(r.Result, "Container.MappedDirectories[0].HostPath") {
		t.Errorf("a Windows host path without a mapping: %#x %s, want E_INVALIDARG naming the field", uint32(r.HResult), r.Result)
	}
}
