package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestKillAndUnmountUnder checks the cleanup's last resort: a process whose cwd is inside the
// root, one chrooted-like by command line, and nested mounts are all gone afterwards.
func TestKillAndUnmountUnder(t *testing.T) {
	RequireRoot(t)
	root, err := os.MkdirTemp("", "runhcs-harness-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)

	outer := filepath.Join(root, "a")
	inner := filepath.Join(outer, "b c") // a space: mountinfo escapes it as \040
	if err := os.MkdirAll(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	if got := mountsUnder(root); len(got) != 2 || got[0] != inner {
		t.Fatalf("mountsUnder = %q, want [%q %q]", got, inner, outer)
	}

	byCwd := exec.Command("sleep", "300")
	byCwd.Dir = inner
	// cat blocks reading a pipe nobody writes; root is on its command line only.
	byArg := exec.Command("cat", "-", root)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	byArg.Stdin = pr
	for _, c := range []*exec.Cmd{byCwd, byArg} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// Reaped as soon as it dies, so it does not linger as a zombie.
		go func() { _ = c.Wait() }()
	}
	pr.Close()
	defer byCwd.Process.Kill()
	defer byArg.Process.Kill()

	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, format) }
	killUnder(root, logf)
	unmountUnder(root, logf)
	if len(logged) != 0 {
		t.Errorf("cleanup complained: %q", logged)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range []*exec.Cmd{byCwd, byArg} {
		for syscall.Kill(c.Process.Pid, 0) == nil {
			if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.Process.Pid), "stat")); err == nil && zombie(st) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d (%v) still running", c.Process.Pid, c.Args)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if left := mountsUnder(root); len(left) != 0 {
		t.Fatalf("still mounted: %q", left)
	}
}
