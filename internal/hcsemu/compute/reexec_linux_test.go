package compute

import (
	"context"
	"strings"
	"testing"
)

// TestNewEngineNeedsReexec checks that an engine refuses to start in a program that has not
// called Reexec, which it would re-execute as a silo or VM init that runs the program's main
// instead, and that it names the call to make. TestMain has called it for every other test.
func TestNewEngineNeedsReexec(t *testing.T) {
	reexecCalled.Store(false)
	defer reexecCalled.Store(true)
	_, err := NewEngine(context.Background(), Config{Root: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "hcsemu.Reexec") {
		t.Fatalf("NewEngine before Reexec: %v, want an error naming hcsemu.Reexec", err)
	}
	if code, ok := Reexec(); ok {
		t.Fatalf("Reexec in the test process: exit code %d, true; want false (no helper variable is set)", code)
	}
	if err := checkReexec(); err != nil {
		t.Errorf("after Reexec: %v", err)
	}
}
