package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
)

// writeBundle makes a task bundle under state with the given files.
func writeBundle(t *testing.T, state, ns, id string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(state, taskStateDir, ns, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindShims(t *testing.T) {
	state := t.TempDir()
	// Pod p1 in k8s.io: two tasks, one shim (the second joined the first's).
	writeBundle(t, state, "k8s.io", "p1", map[string]string{"address": "unix:///run/containerd/s/aaa"})
	writeBundle(t, state, "k8s.io", "c1", map[string]string{"address": "unix:///run/containerd/s/aaa\n"})
	// containerd 2.x bundle whose address file is gone: bootstrap.json has it.
	writeBundle(t, state, "k8s.io", "c2", map[string]string{"bootstrap.json": `{"version":2,"address":"unix:///run/containerd/s/bbb","protocol":"ttrpc"}`})
	// Same address in another namespace is another line (another containerd namespace).
	writeBundle(t, state, "default", "t1", map[string]string{"address": "unix:///run/containerd/s/aaa"})
	// A bundle whose shim is not started yet, and one with a broken bootstrap.json: skipped.
	writeBundle(t, state, "default", "t2", nil)
	writeBundle(t, state, "default", "t3", map[string]string{"bootstrap.json": "{"})
	// Stray files beside the folders are ignored.
	if err := os.WriteFile(filepath.Join(state, taskStateDir, "default", "junk"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		namespace string
		want      string
	}{
		{"", "[{default unix:///run/containerd/s/aaa [t1]} {k8s.io unix:///run/containerd/s/aaa [c1 p1]} {k8s.io unix:///run/containerd/s/bbb [c2]}]"},
		{"k8s.io", "[{k8s.io unix:///run/containerd/s/aaa [c1 p1]} {k8s.io unix:///run/containerd/s/bbb [c2]}]"},
		{"nope", "[]"},
	}
	for _, tc := range tests {
		got, err := findShims(state, tc.namespace)
		if err != nil {
			t.Fatalf("findShims(%q): %v", tc.namespace, err)
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("findShims(%q) = %s, want %s", tc.namespace, s, tc.want)
		}
	}
}

func TestFindShimsNoStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := findShims(dir, "")
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("findShims of %s: %v, want NotFound", dir, err)
	}
}
