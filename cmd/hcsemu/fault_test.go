//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
)

// runFault runs `hcsemu fault ARGS…` in-process and returns its exit code and output.
func runFault(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := fault(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestFaultUsage: bad invocations exit 2 naming the problem, before any connection.
func TestFaultUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--address", sock, "explode"}, `unknown verb "explode"`},
		{[]string{"--address", sock, "stall"}, "wrong number of arguments"},
		{[]string{"--address", sock, "fail", "start"}, "--hresult is required"},
		{[]string{"--address", sock, "fail", "start", "--hresult", "zz"}, `--hresult "zz" is not`},
		{[]string{"--address", sock, "delay", "soon"}, "invalid duration"},
		{[]string{"--address", sock, "list", "extra"}, "wrong number of arguments"},
		{[]string{"--address", sock, "vm"}, "wrong number of arguments"},
		{[]string{"--address", sock, "vm", "x", "--guest-hresult", "zz"}, `--guest-hresult "zz" is not`},
	} {
		code, _, stderr := runFault(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("hcsemu fault %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := runFault("--help"); code != 0 || !strings.Contains(stderr, "stall OP [--for DUR]") {
		t.Errorf("--help: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runFault("--address", sock, "list"); code != 1 || !strings.Contains(stderr, sock) {
		t.Errorf("list with no daemon: exit %d, %q; want 1 naming the socket", code, stderr)
	}
}

// TestFaultCommand runs the hcsemu binary as a daemon and drives it with `hcsemu fault`.
func TestFaultCommand(t *testing.T) {
	testenv.RequireRoot(t, "the daemon's cgroups and mounts")
	dir := t.TempDir()
	bin := filepath.Join(dir, "hcsemu")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "hcsemu.sock")
	daemon := exec.Command(bin, "--address", sock, "--root", filepath.Join(dir, "root"))
	var dlog bytes.Buffer
	daemon.Stderr = &dlog
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		if err := daemon.Wait(); err != nil {
			t.Errorf("hcsemu exited with %v\n%s", err, dlog.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hcsemu did not serve %s\n%s", sock, dlog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	steps := []struct {
		args []string
		code int
		want string // in stdout, or in stderr for a failure
	}{
		{[]string{"list"}, 0, "no faults"},
		{[]string{"stall", "create", "--for", "1h"}, 0, "stall create (CreateComputeSystem) until "},
		{[]string{"stall", "start"}, 0, "stall start (StartComputeSystem) until released, 0 call(s) waiting"},
		{[]string{"fail", "start", "--hresult", "0x80370109", "--count", "1"}, 0, "fail start (StartComputeSystem) with HCS_E_CONNECTION_TIMEOUT (0x80370109), 1 more call(s)"},
		{[]string{"delay", "250ms"}, 0, "delay 250ms on every call"},
		{[]string{"release", "start"}, 0, "stall create"},
		{[]string{"release", "start"}, 1, "no stall"},
		{[]string{"crash", "nonexistent"}, 1, `"nonexistent" not found`},
		{[]string{"stall", "bogus"}, 1, `unknown operation "bogus"`},
		{[]string{"disconnect"}, 0, "delay 250ms"},
		{[]string{"vm", "*", "--boot-delay", "2s", "--guest-hresult", "0x80370109"}, 0, "vm *: boot delay 2s, guest connection fails with HCS_E_CONNECTION_TIMEOUT (0x80370109)"},
		{[]string{"vm", "p@vm", "--guest-hresult", "0x1"}, 1, "is not a failure"},
		{[]string{"vm", "x@vm", "--boot-delay", "1s"}, 0, "vm x@vm: boot delay 1s"},
		{[]string{"clear"}, 0, "no faults"},
		{[]string{"list"}, 0, "no faults"},
	}
	for _, s := range steps {
		cmd := exec.Command(bin, append([]string{"fault", "--address", sock}, s.args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if s.code != 0 {
			got = errb.String()
		}
		if code != s.code || !strings.Contains(got, s.want) {
			t.Errorf("hcsemu fault %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(s.args, " "), code, out.String(), errb.String(), s.code, s.want)
		}
	}
}
