package compute

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// TestDaemonMappedFiles maps single host files into a process-isolated container, as hcsshim
// sends kubelet's file mounts (a MappedDirectory whose HostPath is a file): the termination
// message file read-write, the pod's hosts file read-only, both in the create document, and one
// more through a Container/MappedDirectories Modify. The container writes its termination message
// and the host file holds it; it reads the hosts file and cannot write it.
func TestDaemonMappedFiles(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	host := t.TempDir()
	term, hosts := filepath.Join(host, "termination-log"), filepath.Join(host, "hosts")
	if err := os.WriteFile(term, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, []byte("10.1.2.3\tpod-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, vol := createSystem(t, api, "files", fmt.Sprintf(`,"MappedDirectories":[`+
		`{"HostPath":%q,"ContainerPath":"C:\\dev\\termination-log"},`+
		`{"HostPath":%q,"ContainerPath":"C:\\Windows\\System32\\drivers\\etc\\hosts","ReadOnly":true}]`, term, hosts), true)
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	exec := func(args string) (uint32, string) {
		t.Helper()
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " " + args, CreateStdOutPipe: true})
		out := readAll(t, s.stdout)
		return s.exitCode(t), out
	}

	if code, _ := exec(`write C:\dev\termination-log "the end"`); code != 0 {
		t.Errorf("write the termination message: exit %d", code)
	}
	if b, err := os.ReadFile(term); err != nil || string(b) != "the end" {
		t.Errorf("the host's termination message file holds %q, %v; want the container's message", b, err)
	}
	if code, out := exec(`read C:\Windows\System32\drivers\etc\hosts`); code != 0 || out != "10.1.2.3\tpod-a\n" {
		t.Errorf("read the hosts file: exit %d, %q", code, out)
	}
	if code, _ := exec(`write C:\Windows\System32\drivers\etc\hosts changed`); code == 0 {
		t.Error("wrote to the read-only mapped file")
	}
	if b, _ := os.ReadFile(hosts); string(b) != "10.1.2.3\tpod-a\n" {
		t.Errorf("the read-only host file changed: %q", b)
	}
	// Only the file is shared: its host folder's other files are not in the container.
	if _, err := os.Stat(filepath.Join(vol, "dev", "hosts")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the host folder's other file shows in the container: %v", err)
	}

	// A file mapped while the container runs, and removed.
	extra := filepath.Join(host, "extra.txt")
	os.WriteFile(extra, []byte("added later"), 0o644)
	settings := fmt.Sprintf(`{"HostPath":%q,"ContainerPath":"C:\\data\\extra.txt","ReadOnly":true}`, extra)
	mustRun(t, api, "map a file", func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Add","Settings":`+settings+`}`, 0)
	})
	if code, out := exec(`read C:\data\extra.txt`); code != 0 || out != "added later" {
		t.Errorf("read the file mapped by Modify: exit %d, %q", code, out)
	}
	mustRun(t, api, "unmap the file", func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Remove","Settings":`+settings+`}`, 0)
	})
	if b, _ := os.ReadFile(filepath.Join(vol, "data", "extra.txt")); len(b) != 0 {
		t.Errorf("the file is still mapped after Remove: %q", b)
	}

	// A host path that is neither a folder nor a file (a unix socket) is refused, naming it.
	sock := filepath.Join(host, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	doc, err := run(t, api, func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, fmt.Sprintf(`{"ResourcePath":"Container/MappedDirectories","RequestType":"Add","Settings":{"HostPath":%q,"ContainerPath":"C:\\s"}}`, sock), 0)
	})
	if !errors.Is(err, computecore.E_PATH_NOT_FOUND) || !strings.Contains(doc, "Settings.HostPath") || !strings.Contains(doc, "neither a folder nor a file") {
		t.Errorf("mapping a socket: %v (%s); want E_PATH_NOT_FOUND naming Settings.HostPath, neither a folder nor a file", err, doc)
	}
}
