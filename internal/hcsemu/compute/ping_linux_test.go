package compute

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// TestDaemonPingAsUser: in a container's network namespace any account may ping, as on
// Windows: ContainerUser (no capabilities) runs the ping stand-in, which falls back to a
// datagram ICMP socket, and gets its reply (pingGroupRange).
func TestDaemonPingAsUser(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	nsID, err := d.engine.hns.CreateNamespace(context.Background(), "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	cs, vol := createSystem(t, api, "ping-user", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, nsID), true)
	// As TestDaemonUsers: the layers' files readable by everyone, a Users folder for profiles.
	if err := os.Chmod(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(vol, "Users"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(vol, "workload", "workload.exe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "Windows", "System32", "PING.EXE"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// The container lives as long as a process of it runs.
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	for _, user := range []string{"ContainerUser", "ContainerAdministrator"} {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: "ping -n 1 127.0.0.1", User: user, CreateStdOutPipe: true, CreateStdErrPipe: true})
		out, errOut := readAll(t, s.stdout), readAll(t, s.stderr)
		if code := s.exitCode(t); code != 0 || !strings.Contains(out, "Reply from 127.0.0.1: bytes=32") {
			t.Errorf("ping as %s: exit code %d, output %q, stderr %q; want a reply", user, code, out, errOut)
		}
	}
}
