package compute

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// TestDaemonHostName: a process-isolated container's processes see the HostName of its
// document as the computer's name (hostname.exe's stand-in prints it); a container without one
// sees the host's, and the daemon's own name does not change.
func TestDaemonHostName(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	before, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	hostname := func(t *testing.T, id, extra string) string {
		t.Helper()
		cs, vol := createSystem(t, api, id, extra, true)
		b, err := os.ReadFile(filepath.Join(vol, "workload", "workload.exe"))
		if err != nil {
			t.Fatal(err)
		}
		// The test image's HOSTNAME.EXE: the workload, started under that name.
		if err := os.WriteFile(filepath.Join(vol, "Windows", "System32", "HOSTNAME.EXE"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: "hostname", CreateStdOutPipe: true})
		out := readAll(t, s.stdout)
		if code := s.exitCode(t); code != 0 {
			t.Fatalf("hostname: exit code %d, output %q", code, out)
		}
		return out
	}
	if got := hostname(t, "named", `,"GuestOs":{"HostName":"pod-host"}`); got != "pod-host\r\n" {
		t.Errorf("hostname in a container named pod-host: %q", got)
	}
	// A second process of another container: each container has its own name.
	if got := hostname(t, "named-2", `,"GuestOs":{"HostName":"other-pod"}`); got != "other-pod\r\n" {
		t.Errorf("hostname in a container named other-pod: %q", got)
	}
	if got := hostname(t, "unnamed", ""); got != before+"\r\n" {
		t.Errorf("hostname in a container without HostName: %q, want the host's %q", got, before)
	}
	if after, _ := os.Hostname(); after != before {
		t.Errorf("the daemon's host name changed from %q to %q", before, after)
	}
}

// TestHostedHostName: each container hosted in a utility VM is a computer of its own, named by
// its document's GuestOs.HostName (hcsshim sends the pod's host name there), for its first
// process and for later ones; a hosted container without one sees the VM's name.
func TestHostedHostName(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	startVM(t, e, "named@vm", "10.0.20348.1", 128)
	layer := newLayer(t, "10.0.20348.1", false)
	// The test image's HOSTNAME.EXE: the workload, started under that name.
	wl, err := os.ReadFile(filepath.Join(layer, "Files", "workload", "workload.exe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(layer, "Files", "Windows", "System32"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "Files", "Windows", "System32", "HOSTNAME.EXE"), wl, 0o755); err != nil {
		t.Fatal(err)
	}
	const hostname = `C:\Windows\System32\HOSTNAME.EXE`
	vmName := vmHostname("named@vm") + "\r\n"
	for _, c := range []struct{ id, name, want string }{
		{"pod-app", "pod-host", "pod-host\r\n"},
		{"other-app", "other-pod", "other-pod\r\n"},
		{"unnamed-app", "", vmName},
	} {
		if _, err := hostContainerWith(t, e, "named@vm", c.id, layer, newRecorder(), func(ct *schema2.Container) {
			if c.name != "" {
				ct.GuestOs = &schema2.GuestOs{HostName: c.name}
			}
		}); err != nil {
			t.Fatalf("hosted container %s: %v", c.id, err)
		}
		// A container ends with its last process: one keeps it up while two more ask.
		runInBackground(t, e, c.id, `C:\workload\workload.exe sleep 600`)
		for i := 0; i < 2; i++ {
			if code, out := runIn(t, e, c.id, hostname); code != 0 || out != c.want {
				t.Errorf("hostname in hosted container %s (HostName %q): exit %d, %q; want %q", c.id, c.name, code, out, c.want)
			}
		}
	}
}
