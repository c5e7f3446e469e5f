package wintest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

	// os.Remove deletes a link, never its target.
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

// TestSymlinkReparsePoint: a symbolic link is a reparse point, as Windows reports it and as
// kubelet's AtomicWriter (projected, configMap and secret volumes) relies on: os.Lstat says it is
// a link (also when its target is gone), os.Readlink gives its target as made (relative or
// absolute), and os.RemoveAll of a folder holding links removes the links and not what they
// lead to. Under Wine 8, which reports a Unix link as its target, hack/wine/winesymlink.c makes
// the calls Go uses answer so.
func TestSymlinkReparsePoint(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep.txt"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The volume's layout: ..data → a timestamped folder, each file a link through ..data, and a
	// link to a folder outside the volume.
	vol := filepath.Join(dir, "volume")
	ts := filepath.Join(vol, "..2026_11_27_04_00_00.1")
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"..data":  "..2026_11_27_04_00_00.1",
		"token":   `..data\token`,
		"outside": outside,
		"gone":    "..no-such-folder",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatalf("os.Symlink(%q, %s): %v", target, name, err)
		}
	}
	for name, target := range links {
		p := filepath.Join(vol, name)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("os.Lstat(%s): %v, %v; want a symbolic link", name, fi, err)
		} else if fi.IsDir() {
			t.Errorf("os.Lstat(%s): IsDir; a link is not a folder to Lstat", name)
		}
		if got, err := os.Readlink(p); err != nil || got != target {
			t.Errorf("os.Readlink(%s): %q, %v; want %q", name, got, err, target)
		}
	}
	if b, err := os.ReadFile(filepath.Join(vol, "token")); err != nil || string(b) != "secret" {
		t.Errorf("token through two links: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(vol, "..data")); err != nil || !fi.IsDir() {
		t.Errorf("os.Stat(..data) follows it to a folder: %v, %v", fi, err)
	}
	// Replace ..data, as AtomicWriter does on Windows: remove the link, make it again.
	if err := os.Remove(filepath.Join(vol, "..data")); err != nil {
		t.Fatalf("os.Remove(..data): %v", err)
	}
	if _, err := os.Stat(ts); err != nil {
		t.Errorf("the timestamped folder after its link was removed: %v", err)
	}
	if err := os.Symlink("..2026_11_27_04_00_00.1", filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(vol); err != nil {
		var left []string
		filepath.Walk(vol, func(p string, fi os.FileInfo, err error) error {
			if fi != nil {
				left = append(left, fmt.Sprintf("%s (%v)", p, fi.Mode()))
			}
			return nil
		})
		t.Fatalf("os.RemoveAll of the volume: %v; left: %q", err, left)
	}
	if _, err := os.Lstat(vol); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume after os.RemoveAll: %v, want it gone", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep.txt")); err != nil || string(b) != "keep me" {
		t.Errorf("the folder a removed link led to: %q, %v; want it untouched", b, err)
	}
}

// TestPowershellGetItem: the two PowerShell commands kubelet's Windows subPath preparation runs
// (k8s.io/kubernetes pkg/volume/util/subpath/subpath_windows.go) answer as PowerShell does:
// LinkType "SymbolicLink" and the stored Target for a link, nothing for a folder or a file, and
// a failure for a missing path. Under Wine, hack/wine/powershell stands in for PowerShell.
func TestPowershellGetItem(t *testing.T) {
	if _, err := exec.LookPath("powershell"); err != nil {
		t.Fatalf("no powershell on PATH: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("file.txt", link); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(link)
	ask := func(path, prop string) (string, error) {
		cmd := exec.Command("powershell", "/c", "$ErrorActionPreference = 'Stop'; (Get-Item -Force -LiteralPath $env:linkpath)."+prop)
		cmd.Env = append(os.Environ(), "linkpath="+path)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for _, c := range []struct{ path, prop, want string }{
		{link, "LinkType", "SymbolicLink"},
		{link, "Target", "file.txt"},
		{filepath.Join(dir, "file.txt"), "LinkType", ""},
		{dir, "LinkType", ""},
		{dir, "Target", ""},
	} {
		if got, err := ask(c.path, c.prop); err != nil || got != c.want {
			t.Errorf("(Get-Item %s).%s: %q, %v; want %q", c.path, c.prop, got, err, c.want)
		}
	}
	if out, err := ask(filepath.Join(dir, "missing"), "LinkType"); err == nil {
		t.Errorf("(Get-Item missing).LinkType succeeded with %q; want a failure ($ErrorActionPreference = 'Stop')", out)
	}
}
