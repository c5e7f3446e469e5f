package wintest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/Microsoft/go-winio/pkg/bindfilter"
	"golang.org/x/sys/windows"
)

// TestBindFilterUnmappedFolder: removing the binding of a folder that has none fails with one of
// the two errors containerd (core/mount/mount_windows.go, Unmount) takes for "not a mount
// point", ERROR_NOT_FOUND or ERROR_INVALID_PARAMETER, and the folder and its contents stay; that
// is how containerd deletes a task's bundle whose rootfs the shim mounted itself (under Wine
// also when hcsemu is not there: hack/wine/bindfltapi/bindfltapi.c).
func TestBindFilterUnmappedFolder(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := bindfilter.RemoveFileBinding(root)
	if !errors.Is(err, windows.ERROR_NOT_FOUND) && !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		t.Fatalf("RemoveFileBinding of a folder with no binding: %v; want ERROR_NOT_FOUND or ERROR_INVALID_PARAMETER", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "f")); err != nil || string(b) != "x" {
		t.Errorf("the folder's file after RemoveFileBinding: %q, %v", b, err)
	}
}

// TestBindFilterMapping: a host-wide mapping (go-winio ApplyFileBinding, as the shim binds a
// HostProcess container's files) makes the target's files appear at the root, which need not
// exist (go-winio makes its parent), read-only when asked; a second mapping at the root is refused;
// RemoveFileBinding removes it, and the root made for it goes; the target's files stay. Under
// Wine the stand-in bindfltapi.dll has hcsemu make a bind mount, so hcsemu must serve the
// stand-ins (hack/wine/test.sh as root).
func TestBindFilterMapping(t *testing.T) {
	if UnderWine() && os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		t.Skip("no hcsemu: run hack/wine/test.sh as root")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f"), []byte("mapped"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	if err := bindfilter.ApplyFileBinding(root, src, false); err != nil {
		t.Fatalf("ApplyFileBinding: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "sub", "f")); err != nil || string(b) != "mapped" {
		t.Errorf("a file through the mapping: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(root, "new"), []byte("w"), 0o644); err != nil {
		t.Errorf("writing through a read-write mapping: %v", err)
	} else if b, err := os.ReadFile(filepath.Join(src, "new")); err != nil || string(b) != "w" {
		t.Errorf("the target's file written through the mapping: %q, %v", b, err)
	}
	if err := bindfilter.ApplyFileBinding(root, src, false); err == nil {
		t.Errorf("a second mapping at the same root: no error")
	}
	if err := bindfilter.RemoveFileBinding(root); err != nil {
		t.Fatalf("RemoveFileBinding: %v", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root after RemoveFileBinding: %v; want it gone", err)
	}
	if err := bindfilter.RemoveFileBinding(root); !errors.Is(err, windows.ERROR_NOT_FOUND) && !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		t.Errorf("RemoveFileBinding again: %v; want ERROR_NOT_FOUND or ERROR_INVALID_PARAMETER", err)
	}

	ro := filepath.Join(dir, "ro")
	if err := bindfilter.ApplyFileBinding(ro, src, true); err != nil {
		t.Fatalf("ApplyFileBinding read-only: %v", err)
	}
	defer bindfilter.RemoveFileBinding(ro)
	if b, err := os.ReadFile(filepath.Join(ro, "sub", "f")); err != nil || string(b) != "mapped" {
		t.Errorf("a file through the read-only mapping: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro, "new2"), []byte("w"), 0o644); err == nil {
		t.Errorf("writing through a read-only mapping: no error")
	}
	if err := bindfilter.RemoveFileBinding(ro); err != nil {
		t.Errorf("RemoveFileBinding read-only: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(src, "sub", "f")); err != nil || string(b) != "mapped" {
		t.Errorf("the target's file after the mappings' removal: %q, %v", b, err)
	}
}
