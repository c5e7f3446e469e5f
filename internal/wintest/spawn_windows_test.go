package wintest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// spawnHelperEnv makes the test binary, started by TestCreateProcessRetry, start one process
// (itself, running no test) and report the outcome on stdout.
const spawnHelperEnv = "RUNHCS_WINTEST_SPAWN_HELPER"

// retryLine is what hack/wine/winespawn.c writes to stderr for each start it does again.
const retryLine = "CreateProcessW: Wine could not start the new process (ERROR_INTERNAL_ERROR); starting it again"

// spawnOnce is the helper: it starts the test binary running no test and says how that went.
func spawnOnce() int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Not a helper again, nor with faults of its own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, spawnHelperEnv+"=") && !strings.HasPrefix(kv, "RUNHCS_WINECOMPAT_SPAWN_FAULTS=") {
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
// program's code), at most three times in all, saying so on stderr for each retry, as
// hack/wine/winespawn.c does; on Windows a CreateProcess does not fail that way. Wine's failure
// cannot be made to happen, so RUNHCS_WINECOMPAT_SPAWN_FAULTS makes the first calls of a helper
// process fail as Wine's do.
func TestCreateProcessRetry(t *testing.T) {
	if !UnderWine() {
		t.Skip("Wine only: hack/wine/winespawn.c is not loaded on Windows")
	}
	for _, tc := range []struct {
		faults  string
		want    string
		retries int
	}{
		{"", "started", 0},
		{"1", "started", 1},
		{"2", "started", 2},
		{"3", "ERROR_INTERNAL_ERROR", 2}, // three attempts in all, then the caller sees the error
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), spawnHelperEnv+"=1", "RUNHCS_WINECOMPAT_SPAWN_FAULTS="+tc.faults)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("faults %q: helper: %v (stderr %q)", tc.faults, err, stderr.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != tc.want {
			t.Errorf("faults %q: helper's start: %q, want %q (stderr %q)", tc.faults, got, tc.want, stderr.String())
		}
		if got := strings.Count(stderr.String(), retryLine); got != tc.retries {
			t.Errorf("faults %q: %d retries said on stderr, want %d (stderr %q)", tc.faults, got, tc.retries, stderr.String())
		}
	}
}
