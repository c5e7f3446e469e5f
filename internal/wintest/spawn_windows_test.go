package wintest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// spawnHelperEnv makes the test binary, started by TestCreateProcessRetry, start one process
// (itself, running no test) and report the outcome on stdout.
const spawnHelperEnv = "RUNHCS_WINTEST_SPAWN_HELPER"

// retryLine is what hack/wine/winespawn.c reports for each start it does again, to the file
// RUNHCS_WINECOMPAT_LOG names.
const retryLine = "CreateProcessW: Wine could not start the new process (ERROR_INTERNAL_ERROR); starting it again"

// spawnOnce is the helper: it starts the test binary running no test and says how that went.
func spawnOnce() int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Not a helper again, nor with faults of its own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, spawnHelperEnv+"=") && !strings.HasPrefix(kv, "RUNHCS_WINECOMPAT_SPAWN_FAULTS=") &&
			!strings.HasPrefix(kv, "RUNHCS_WINECOMPAT_LOG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	err := cmd.Run()
	switch {
	case err == nil:
		fmt.Println("started")
	case errors.Is(err, windows.ERROR_INTERNAL_ERROR):
		fmt.Println("ERROR_INTERNAL_ERROR")
	default:
		fmt.Println("other:", err)
	}
	return 0
}

// TestCreateProcessRetry: under Wine, CreateProcessW starts a process again when Wine failed to
// start it (ERROR_INTERNAL_ERROR: the new process died in Wine's own start-up, before any of the
// program's code), at most three times in all, as hack/wine/winespawn.c does; on Windows a
// CreateProcess does not fail that way. Each retry is a line in the file RUNHCS_WINECOMPAT_LOG
// names and never a byte on the process's stdout or stderr, which can be its answer (the shim's
// start action's is containerd's bootstrap answer). Wine's failure cannot be made to happen, so
// RUNHCS_WINECOMPAT_SPAWN_FAULTS makes the first calls of a helper process fail as Wine's do.
func TestCreateProcessRetry(t *testing.T) {
	if !UnderWine() {
		t.Skip("Wine only: hack/wine/winespawn.c is not loaded on Windows")
	}
	for _, tc := range []struct {
		faults  string
		log     bool
		want    string
		retries int
	}{
		{"", true, "started", 0},
		{"1", true, "started", 1},
		{"2", true, "started", 2},
		{"3", true, "ERROR_INTERNAL_ERROR", 2}, // three attempts in all, then the caller sees the error
		{"1", false, "started", 0},             // no log named: the debugger's channel, not stderr
	} {
		log := filepath.Join(t.TempDir(), "winecompat.log")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), spawnHelperEnv+"=1", "RUNHCS_WINECOMPAT_SPAWN_FAULTS="+tc.faults)
		if tc.log {
			cmd.Env = append(cmd.Env, "RUNHCS_WINECOMPAT_LOG="+log)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("faults %q: helper: %v (stderr %q)", tc.faults, err, stderr.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != tc.want {
			t.Errorf("faults %q: helper's start: %q, want %q (stderr %q)", tc.faults, got, tc.want, stderr.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("faults %q: the helper wrote to stderr: %q, want nothing", tc.faults, stderr.String())
		}
		data, err := os.ReadFile(log)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if got := strings.Count(string(data), retryLine); got != tc.retries {
			t.Errorf("faults %q: %d retries in %s, want %d (%q)", tc.faults, got, log, tc.retries, data)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\r\n") {
			if line != "" && !strings.HasPrefix(line, "pid ") {
				t.Errorf("faults %q: log line %q does not start with the process id", tc.faults, line)
			}
		}
	}
}
