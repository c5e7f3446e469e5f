package wintest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/windows"
)

// TestSymlink: os.Symlink (CreateSymbolicLinkW) makes links that opens follow, as Windows
// does: to a folder by its absolute path and by a relative one (relative to the link's
// folder), and to a single file; a name that exists is refused with ERROR_ALREADY_EXISTS, a
// missing folder with ERROR_PATH_NOT_FOUND. Under Wine 8, whose CreateSymbolicLinkW makes
// nothing and answers TRUE, hack/wine/winesymlink.c makes them (Unix links Wine follows).
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "in.txt"), []byte("in the folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("a single file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, target string }{{"abs-link", real}, {"rel-link", "real"}} {
		link := filepath.Join(dir, l.name)
		if err := os.Symlink(l.target, link); err != nil {
			if errors.Is(err, windows.ERROR_PRIVILEGE_NOT_HELD) {
				// Windows without developer mode, as a non-administrator (never under Wine).
				t.Skipf("os.Symlink: %v", err)
			}
			t.Fatalf("os.Symlink(%q, %q): %v", l.target, link, err)
		}
		if fi, err := os.Stat(link); err != nil || !fi.IsDir() {
			t.Errorf("os.Stat(%s) through a link to %q: %v, %v; want a folder", l.name, l.target, fi, err)
		}
		entries, err := os.ReadDir(link)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if err != nil || !slices.Equal(names, []string{"in.txt"}) {
			t.Errorf("the folder through %s: %q, %v; want in.txt", l.name, names, err)
		}
		if b, err := os.ReadFile(filepath.Join(link, "in.txt")); err != nil || string(b) != "in the folder" {
			t.Errorf("in.txt through %s: %q, %v", l.name, b, err)
		}
	}
	fileLink := filepath.Join(dir, "file-link")
	if err := os.Symlink(file, fileLink); err != nil {
		t.Fatalf("os.Symlink to a file: %v", err)
	}
	if b, err := os.ReadFile(fileLink); err != nil || string(b) != "a single file" {
		t.Errorf("the file through its link: %q, %v", b, err)
	}
	if err := os.Symlink(real, fileLink); !errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
		t.Errorf("a link over an existing name: %v, want ERROR_ALREADY_EXISTS", err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "missing", "link")); !errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		t.Errorf("a link in a missing folder: %v, want ERROR_PATH_NOT_FOUND", err)
	}

	// os.Remove deletes a link, never its target. (The links go before t.TempDir's
	// RemoveAll, which under Wine 8 would go through a folder link: see winesymlink.c.)
	for _, name := range []string{"abs-link", "rel-link", "file-link"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Errorf("os.Remove(%s): %v", name, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after os.Remove: %v, want it gone", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(real, "in.txt")); err != nil || string(b) != "in the folder" {
		t.Errorf("the folder's file after its links were removed: %q, %v", b, err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "a single file" {
		t.Errorf("the file after its link was removed: %q, %v", b, err)
	}
}
