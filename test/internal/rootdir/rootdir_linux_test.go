package rootdir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestEnvRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "node.env")
	vars := [][2]string{{"A", "plain"}, {"B", "it's quoted"}, {"C", `C:\x y`}, {"D", ""}}
	if err := WriteEnv(p, vars); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEnv(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range vars {
		if got[kv[0]] != kv[1] {
			t.Errorf("%s: read %q, wrote %q", kv[0], got[kv[0]], kv[1])
		}
	}
	if _, err := ReadEnv(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadEnv of a missing file: %v, want os.ErrNotExist", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/a\134b`: `/a\b`, `/a\04`: `/a\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHasEnv finds an entry of this process's environment, and not a prefix of one.
func TestHasEnv(t *testing.T) {
	t.Setenv("RUNHCS_ROOTDIR_TEST", "x")
	// The environment a process started with: a child's.
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	if !HasEnv(pid, "RUNHCS_ROOTDIR_TEST=x") {
		t.Error("HasEnv: the child's RUNHCS_ROOTDIR_TEST=x not found")
	}
	for _, kv := range []string{"RUNHCS_ROOTDIR_TEST=", "RUNHCS_ROOTDIR_TEST=xy", "RUNHCS_ROOTDIR_TES"} {
		if HasEnv(pid, kv) {
			t.Errorf("HasEnv(%q): found", kv)
		}
	}
}
