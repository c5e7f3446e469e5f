package compute

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// symlinkedHost makes a host folder holding data/in.txt and file.txt, and links to them as a
// Windows program makes them under Wine (hack/wine/winesymlink.c: Unix links, to the target's
// Unix path or relative to the link's folder): dir-abs and dir-rel to data, file-abs and
// file-rel to file.txt. It returns the folder.
func symlinkedHost(t *testing.T) string {
	t.Helper()
	host := t.TempDir()
	if err := os.Mkdir(filepath.Join(host, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "data", "in.txt"), []byte("in the folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "file.txt"), []byte("a single file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"dir-abs": filepath.Join(host, "data"), "dir-rel": "data",
		"file-abs": filepath.Join(host, "file.txt"), "file-rel": "file.txt",
	} {
		if err := os.Symlink(target, filepath.Join(host, link)); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// TestDaemonMappedSymlinks: a MappedDirectory whose HostPath is a symbolic link maps the link's
// target, as HCS does on Windows: a link to a folder (absolute or relative target) shows the
// folder's files, a link to a single file maps that file (a file mount), in a process-isolated
// container.
func TestDaemonMappedSymlinks(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	host := symlinkedHost(t)
	cs, _ := createSystem(t, api, "symlinks", fmt.Sprintf(`,"MappedDirectories":[`+
		`{"HostPath":%q,"ContainerPath":"C:\\abs","ReadOnly":true},`+
		`{"HostPath":%q,"ContainerPath":"C:\\rel","ReadOnly":true},`+
		`{"HostPath":%q,"ContainerPath":"C:\\config\\abs.txt","ReadOnly":true},`+
		`{"HostPath":%q,"ContainerPath":"C:\\config\\rel.txt","ReadOnly":true}]`,
		filepath.Join(host, "dir-abs"), filepath.Join(host, "dir-rel"), filepath.Join(host, "file-abs"), filepath.Join(host, "file-rel")), true)
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	for path, want := range map[string]string{
		`C:\abs\in.txt`: "in the folder", `C:\rel\in.txt`: "in the folder",
		`C:\config\abs.txt`: "a single file", `C:\config\rel.txt`: "a single file",
	} {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " read " + path, CreateStdOutPipe: true})
		if out := readAll(t, s.stdout); s.exitCode(t) != 0 || out != want {
			t.Errorf("read %s through a linked host path: %q, want %q", path, out, want)
		}
	}
}

// TestHostedMappedSymlinks: a VSMB share whose Path is a symbolic link shares the link's
// target into a utility VM, a folder link as a folder and a file link as a single-file share's
// file, and a hosted container reads them through its mappings.
func TestHostedMappedSymlinks(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	startVM(t, e, "links@vm", "10.0.20348.1", 128)
	layer := newLayer(t, "10.0.20348.1", false)
	if _, err := hostContainer(t, e, "links@vm", "app", layer, newRecorder()); err != nil {
		t.Fatal(err)
	}
	runInBackground(t, e, "app", `C:\workload\workload.exe sleep 600`)
	host := symlinkedHost(t)
	shares := []schema2.VirtualSmbShare{
		{Name: "dirlink", Path: filepath.Join(host, "dir-rel"), Options: &schema2.VirtualSmbShareOptions{ReadOnly: true}},
		// hcsshim shares a file mount's folder, restricted to the file (a link here).
		{Name: "filelink", Path: host, AllowedFiles: []string{"file-abs"},
			Options: &schema2.VirtualSmbShareOptions{ReadOnly: true, RestrictFileAccess: true, SingleFileMapping: true}},
	}
	for _, sh := range shares {
		if err := modify(e, "links@vm", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeAdd, Settings: sh}); err != nil {
			t.Fatalf("share %s: %v", sh.Name, err)
		}
	}
	for _, md := range []schema2.MappedDirectory{
		{HostPath: schema2.VSMBGuestPath("dirlink"), ContainerPath: `C:\data`, ReadOnly: true},
		{HostPath: schema2.VSMBGuestPath("filelink") + `\file-abs`, ContainerPath: `C:\config\file.txt`, ReadOnly: true},
	} {
		if err := modify(e, "app", schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories, RequestType: schema2.RequestTypeAdd, Settings: md}); err != nil {
			t.Fatalf("map %s: %v", md.HostPath, err)
		}
	}
	for path, want := range map[string]string{`C:\data\in.txt`: "in the folder", `C:\config\file.txt`: "a single file"} {
		if code, out := runIn(t, e, "app", `C:\workload\workload.exe read `+path); code != 0 || out != want {
			t.Errorf("read %s in the hosted container: exit %d, %q; want %q", path, code, out, want)
		}
	}
}
