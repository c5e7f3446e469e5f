package hcsemu

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
