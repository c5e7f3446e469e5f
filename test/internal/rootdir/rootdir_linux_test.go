package rootdir

import (
	"errors"
	"os"
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
