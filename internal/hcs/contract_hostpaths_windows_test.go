package hcs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/wintest"
)

// TestContractWindowsHostPaths gives a container's mapped directories as a Windows program on a
// Windows host names them: by their Windows paths (under Wine Z:\… for the Linux root and C:\…
// for the prefix's drive_c, as Wine shows them to this process), in the create document and in
// a Modify, and the workload reads the host folder's file through each. On Windows HCS opens
// these paths as they are; under Wine the stand-in computecore.dll gives hcsemu its prefix's
// drive mapping (wire.MethodClientPaths) so that it resolves them as Wine does.
func TestContractWindowsHostPaths(t *testing.T) {
	env := requireContract(t)
	if !wintest.UnderWine() {
		t.Skip("needs the paths Wine shows: on Windows every contract test's host paths are Windows paths already")
	}
	ctx := testCtx(t)
	zDir, _ := env.hostDir(t) // Z:\…, a Linux folder through Wine's drive Z:
	cDir := t.TempDir()       // under the prefix's drive C: (Wine's %TEMP%)
	if !strings.HasPrefix(strings.ToUpper(zDir), `Z:\`) || !strings.HasPrefix(strings.ToUpper(cDir), `C:\`) {
		t.Fatalf("host folders %q and %q are not on drives Z: and C:", zDir, cDir)
	}
	for dir, content := range map[string]string{zDir: "from-drive-z", cDir: "from-drive-c"} {
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newContainer(t, env, true, func(c *schema2.Container) {
		c.MappedDirectories = []schema2.MappedDirectory{{HostPath: zDir, ContainerPath: `C:\z`, ReadOnly: true}}
	})
	keepAlive(t, s)
	md := &schema2.MappedDirectory{HostPath: cDir, ContainerPath: `C:\c`}
	if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories,
		RequestType: schema2.RequestTypeAdd, Settings: md}); err != nil {
		t.Fatalf("Modify add mapped directory %s: %v", cDir, err)
	}
	for file, want := range map[string]string{"/z/f.txt": "from-drive-z", "/c/f.txt": "from-drive-c"} {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("read", file), CreateStdOutPipe: true, CreateStdErrPipe: true})
		_, out, errp := p.Stdio()
		if got := readAll(t, out, 30*time.Second); got != want {
			t.Errorf("read %s: %q (stderr %q), want %q", file, got, readAll(t, errp, 30*time.Second), want)
		}
		if code := waitExit(t, p, 30*time.Second); code != 0 {
			t.Errorf("read %s: exit code %d", file, code)
		}
	}
	// The read-write one takes the container's write, which this process sees on drive C:.
	p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("write", "/c/out.txt", "from-the-container"), CreateStdErrPipe: true})
	if code := waitExit(t, p, 30*time.Second); code != 0 {
		t.Fatalf("write /c/out.txt: exit code %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(cDir, "out.txt")); err != nil || string(b) != "from-the-container" {
		t.Errorf("the container's write through %s: %q, %v", cDir, b, err)
	}

	// The same folder by its volume name (\\?\Volume{GUID}\rest, as containerd's CRI plugin
	// names a mount's host path): the volume of drive C: as this process sees it.
	vol := make([]uint16, windows.MAX_PATH)
	if err := windows.GetVolumeNameForVolumeMountPoint(windows.StringToUTF16Ptr(`C:\`), &vol[0], uint32(len(vol))); err != nil {
		t.Fatalf("GetVolumeNameForVolumeMountPoint(C:\\): %v", err)
	}
	byVolume := windows.UTF16ToString(vol) + cDir[len(`C:\`):]
	vmd := &schema2.MappedDirectory{HostPath: byVolume, ContainerPath: `C:\v`, ReadOnly: true}
	if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories,
		RequestType: schema2.RequestTypeAdd, Settings: vmd}); err != nil {
		t.Fatalf("Modify add mapped directory %s: %v", byVolume, err)
	}
	p = run(t, s, &schema2.ProcessParameters{CommandLine: workload("read", "/v/f.txt"), CreateStdOutPipe: true, CreateStdErrPipe: true})
	_, out, errp := p.Stdio()
	if got := readAll(t, out, 30*time.Second); got != "from-drive-c" {
		t.Errorf("read /v/f.txt through %s: %q (stderr %q)", byVolume, got, readAll(t, errp, 30*time.Second))
	}
	if code := waitExit(t, p, 30*time.Second); code != 0 {
		t.Errorf("read /v/f.txt: exit code %d", code)
	}

	// A path climbing out of its drive is refused, naming the field.
	bad := &schema2.MappedDirectory{HostPath: `C:\..\..\etc`, ContainerPath: `C:\bad`}
	err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories,
		RequestType: schema2.RequestTypeAdd, Settings: bad})
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "Settings.HostPath") {
		t.Errorf("Modify add %q: %v, want E_INVALIDARG naming Settings.HostPath", bad.HostPath, err)
	}
}
