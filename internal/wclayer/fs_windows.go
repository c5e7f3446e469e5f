package wclayer

import (
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/containerd/errdefs"
)

// On Windows a layer folder must be written with the backup APIs (BackupWrite, with
// SeBackupPrivilege/SeRestorePrivilege) and the layer must be registered with the storage
// filter, which hcsshim's wclayer package does. runhcs does not carry that code yet; the
// folder-and-xattr representation of this package is the Linux one only.
func supported() error {
	return fmt.Errorf("importing and exporting layers on Windows (the backup APIs, as hcsshim's ociwclayer uses them): %w", errdefs.ErrNotImplemented)
}

func setXattr(path, name string, value []byte) error { return supported() }
func getXattr(path, name string) ([]byte, error)     { return nil, supported() }
func removeXattr(path, name string) error            { return supported() }
func mknodWhiteout(path string) error                { return supported() }
func isWhiteout(fi fs.FileInfo) bool                 { return false }
func setTimes(path string, atime, mtime time.Time) error {
	return supported()
}

func inodeOf(fi fs.FileInfo) (inodeKey, uint64) { return inodeKey{}, 1 }
func syncFS(path string) error                  { return nil }

func writeRegular(path string, r io.Reader, buf []byte, attr string, meta []byte, atime, mtime time.Time) (int64, error) {
	return 0, supported()
}
