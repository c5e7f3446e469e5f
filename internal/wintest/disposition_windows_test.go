package wintest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// fileDispositionInformationEx is FILE_DISPOSITION_INFORMATION_EX's class (ntifs.h).
const fileDispositionInformationEx = 64

// setDispositionEx sets FILE_DISPOSITION_INFORMATION_EX with flags on a file opened for delete,
// as hcsshim's safefile.RemoveRelative does (deleteOnClose), and closes it.
func setDispositionEx(t *testing.T, path string, flags uint32) error {
	t.Helper()
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(p, windows.DELETE|windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer windows.CloseHandle(h)
	var iosb windows.IO_STATUS_BLOCK
	return windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&flags)), uint32(unsafe.Sizeof(flags)), fileDispositionInformationEx)
}

// TestDispositionExDelete: FILE_DISPOSITION_DELETE alone through FileDispositionInformationEx
// deletes the file when the handle closes, and FILE_DISPOSITION_DO_NOT_DELETE leaves it, as
// Microsoft documents FILE_DISPOSITION_INFORMATION_EX; under Wine 8, which lacks the class,
// hack/wine/winecompat.c carries these two out with FileDispositionInformation. The POSIX
// semantics Go asks for still answer STATUS_INVALID_INFO_CLASS there, so Go takes its fallback
// (checked by every os.RemoveAll of the tests).
func TestDispositionExDelete(t *testing.T) {
	dir := t.TempDir()
	keep, gone, emptyDir := filepath.Join(dir, "keep"), filepath.Join(dir, "gone"), filepath.Join(dir, "d")
	for _, f := range []string{keep, gone} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := setDispositionEx(t, keep, 0); err != nil {
		t.Fatalf("FILE_DISPOSITION_DO_NOT_DELETE: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("FILE_DISPOSITION_DO_NOT_DELETE removed the file: %v", err)
	}
	for _, p := range []string{gone, emptyDir} {
		if err := setDispositionEx(t, p, 1); err != nil {
			t.Fatalf("FILE_DISPOSITION_DELETE on %s: %v", p, err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after FILE_DISPOSITION_DELETE and close: %v; want it gone", p, err)
		}
	}
}
