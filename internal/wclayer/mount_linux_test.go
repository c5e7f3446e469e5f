package wclayer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountChain mounts a scratch layer over a base and a child layer, writes through the
// volume and exports the scratch layer's changes.
func TestMountChain(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	importBytes(t, New(), winTar(t, baseEntries()), base, nil)
	child := filepath.Join(dir, "child")
	importBytes(t, New(), winTar(t, childEntries()), child, []string{base})
	parents := []string{child, base}

	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(FilesPath(scratch), 0o755); err != nil {
		t.Fatal(err)
	}
	vol, err := New().Mount(ctx, scratch, parents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = New().Unmount(ctx, scratch) })
	if again, err := New().Mount(ctx, scratch, parents); err != nil || again != vol {
		t.Fatalf("second Mount = %q, %v; want %q", again, err, vol)
	}

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(vol, p))
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	for p, want := range map[string]string{
		"Windows/System32/cmd.exe":    "patched",
		"workload/new.txt":            "new",
		"ProgramData/app.cfg":         "cfg",
		"workload/workload.exe":       "error: open " + filepath.Join(vol, "workload/workload.exe") + ": no such file or directory",
		"Windows/System32/hidden.sys": "error: open " + filepath.Join(vol, "Windows/System32/hidden.sys") + ": no such file or directory",
	} {
		if got := read(p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Writes land in the scratch layer only.
	if err := os.WriteFile(filepath.Join(vol, "written.txt"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(vol, "ProgramData/app.cfg")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "Windows/System32/cmd.exe"), []byte("container"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A folder deleted whole, and one deleted and made again: a whiteout and an opaque folder.
	if err := os.RemoveAll(filepath.Join(vol, "ProgramData")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(vol, "Windows", "System32")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(vol, "Windows", "System32"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "Windows", "System32", "only.dll"), []byte("only"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(FilesPath(child), "written.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write reached a parent layer: %v", err)
	}
	got := readEntries(t, exportBytes(t, New(), scratch))
	for name, check := range map[string]func(tarEntry) bool{
		"Files/written.txt": func(e tarEntry) bool {
			return e.Typeflag == tar.TypeReg && e.Size == 1 && strings.Contains(e.PAX, PAXFileAttributes)
		},
		"Files/.wh.ProgramData":               func(e tarEntry) bool { return e.Size == 0 },
		"Files/Windows/System32":              func(e tarEntry) bool { return e.Typeflag == tar.TypeDir },
		"Files/Windows/System32/.wh..wh..opq": func(e tarEntry) bool { return e.Size == 0 },
		"Files/Windows/System32/only.dll":     func(e tarEntry) bool { return e.Size == 4 },
	} {
		e, ok := got[name]
		if !ok || !check(e) {
			t.Errorf("scratch export: %q = %+v (present %v)", name, e, ok)
		}
	}
	for _, name := range []string{"Files/workload/workload.exe", "Files/WINDOWS/System32/cmd.exe", "Files/ProgramData/app.cfg"} {
		if _, ok := got[name]; ok {
			t.Errorf("scratch export holds %s, which the container did not change or deleted", name)
		}
	}
	// A change to a file keeps the Windows metadata of the file it replaced (overlayfs
	// copies trusted.* up), and a second scratch checks that.
	if err := os.WriteFile(filepath.Join(vol, "workload", "new.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = readEntries(t, exportBytes(t, New(), scratch))
	if e, ok := got["Files/workload/new.txt"]; !ok || e.Size != 7 || !strings.Contains(e.PAX, PAXFileAttributes+"=32") || !strings.Contains(e.PAX, PAXCreationTime) {
		t.Errorf("changed file exported as %+v (present %v)", e, ok)
	}

	// Exports are reproducible: reading the files in between (access times) changes nothing.
	first := exportBytes(t, New(), scratch)
	for _, p := range []string{"written.txt", "workload/new.txt", "Windows/System32/only.dll"} {
		if _, err := os.ReadFile(filepath.Join(vol, p)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(first, exportBytes(t, New(), scratch)) {
		t.Fatal("two exports of an unchanged scratch layer differ")
	}

	if err := New().Unmount(ctx, scratch); err != nil {
		t.Fatal(err)
	}
	if ok, err := New().IsMounted(scratch); err != nil || ok {
		t.Fatalf("IsMounted after Unmount = %v, %v", ok, err)
	}
	if err := New().Unmount(ctx, scratch); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if err := New().Unmount(ctx, filepath.Join(dir, "never-existed")); err != nil {
		t.Fatalf("Unmount of a missing folder: %v", err)
	}
}

func TestMountShapes(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	importBytes(t, New(), winTar(t, baseEntries()), base, nil)
	child := filepath.Join(dir, "child")
	importBytes(t, New(), winTar(t, childEntries()), child, []string{base})

	tests := []struct {
		name    string
		rw      bool
		parents []string
		probe   string // a file expected in the volume
	}{
		{"new base layer", true, nil, ""},
		{"view of one layer", false, []string{base}, "workload/workload.exe"},
		{"view of a chain", false, []string{child, base}, "workload/new.txt"},
		{"scratch over one layer", true, []string{base}, "Windows/System32/cmd.exe"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scratch := filepath.Join(dir, "s", string(rune('a'+i)))
			if err := os.MkdirAll(scratch, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.rw {
				if err := os.MkdirAll(FilesPath(scratch), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			vol, err := New().Mount(ctx, scratch, tc.parents)
			if err != nil {
				t.Fatal(err)
			}
			defer New().Unmount(ctx, scratch)
			if tc.probe != "" {
				if _, err := os.Stat(filepath.Join(vol, tc.probe)); err != nil {
					t.Fatalf("volume lacks %s: %v", tc.probe, err)
				}
			}
			err = os.WriteFile(filepath.Join(vol, "w"), nil, 0o644)
			if tc.rw != (err == nil) {
				t.Fatalf("write into volume (rw=%v): %v", tc.rw, err)
			}
		})
	}
	if _, err := New().Mount(ctx, filepath.Join(dir, "s", "a"), []string{filepath.Join(dir, "nope")}); err == nil {
		t.Fatal("Mount over a missing parent succeeded")
	}
}

// TestMountDeepChain mounts a chain too long for mount(2)'s one-page option string.
func TestMountDeepChain(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	var parents []string
	for i := 0; i < 60; i++ {
		l := filepath.Join(dir, strings.Repeat("x", 60), fmt.Sprint(i))
		ents := []fent{{name: fmt.Sprintf("Files/f%02d", i), typ: tar.TypeReg, body: "x", attrs: 0x20}}
		importBytes(t, New(), winTar(t, ents), l, nil)
		parents = append([]string{l}, parents...)
	}
	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(FilesPath(scratch), 0o755); err != nil {
		t.Fatal(err)
	}
	vol, err := New().Mount(ctx, scratch, parents)
	if err != nil {
		t.Fatal(err)
	}
	defer New().Unmount(ctx, scratch)
	for i := 0; i < 60; i++ {
		if _, err := os.Stat(filepath.Join(vol, fmt.Sprintf("f%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
}
