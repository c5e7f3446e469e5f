package wclayer

import (
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/containerd/errdefs"
)

// The folder-and-xattr representation of import.go and export.go is the emulator's. On Windows
// ImportLayer and ExportLayer never reach it: import_windows.go routes them to Microsoft's layer
// APIs (hcsshim's ociwclayer, which writes with BackupWrite). These stubs only let the portable
// code compile, and say so if anything calls them.
func supported() error {
	return fmt.Errorf("the folder-and-xattr layer representation is the emulator's; Windows uses hcsshim's ociwclayer: %w", errdefs.ErrNotImplemented)
}

func setXattr(path, name string, value []byte) error { return supported() }
func getXattr(path, name string) ([]byte, error)     { return nil, supported() }
func removeXattr(path, name string) error            { return supported() }
func mknodWhiteout(path string) error                { return supported() }
func isWhiteout(fi fs.FileInfo) bool                 { return false }
func setTimes(path string, atime, mtime time.Time) error {
	return supported()
}

// inodeOf is never reached on Windows (see supported); every node counts as its own file.
func inodeOf(fi fs.FileInfo) (inodeKey, uint64) { return inodeKey{dev: 0, ino: 0}, 1 }
func syncFS(path string) error                  { return nil }

func writeRegular(path string, r io.Reader, buf []byte, attr string, meta []byte, atime, mtime time.Time) (int64, error) {
	return 0, supported()
}
