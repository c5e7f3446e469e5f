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
// is how containerd deletes a task's bundle whose rootfs the shim mounted itself. Under Wine,
// hack/wine/bindfltapi/bindfltapi.c stands in for the bind filter; it makes no mappings, and
// says so: ApplyFileBinding fails there with E_NOTIMPL.
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
	if !UnderWine() {
		return
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	const eNotImpl = windows.Errno(0x80004001)
	if err := bindfilter.ApplyFileBinding(filepath.Join(dir, "target"), src, false); !errors.Is(err, eNotImpl) {
		t.Errorf("ApplyFileBinding under Wine: %v; want E_NOTIMPL (the stand-in makes no mappings)", err)
	}
}
