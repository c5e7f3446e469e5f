package wclayer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func setXattr(path, name string, value []byte) error {
	if err := unix.Lsetxattr(path, name, value, 0); err != nil {
		return &os.PathError{Op: "setxattr " + name, Path: path, Err: err}
	}
	return nil
}

// getXattr returns the attribute, or nil with no error when the node does not have it.
func getXattr(path, name string) ([]byte, error) {
	buf := make([]byte, 512)
	for {
		n, err := unix.Lgetxattr(path, name, buf)
		switch {
		case err == nil:
			return buf[:n], nil
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE):
			sz, err2 := unix.Lgetxattr(path, name, nil)
			if err2 != nil {
				return nil, &os.PathError{Op: "getxattr " + name, Path: path, Err: err2}
			}
			buf = make([]byte, sz)
			continue
		default:
			return nil, &os.PathError{Op: "getxattr " + name, Path: path, Err: err}
		}
	}
}

func removeXattr(path, name string) error {
	if err := unix.Lremovexattr(path, name); err != nil && !errors.Is(err, unix.ENODATA) {
		return &os.PathError{Op: "removexattr " + name, Path: path, Err: err}
	}
	return nil
}

// mknodWhiteout makes an overlayfs whiteout: a character device 0/0.
func mknodWhiteout(path string) error {
	if err := unix.Mknod(path, unix.S_IFCHR, 0); err != nil {
		return &os.PathError{Op: "mknod whiteout", Path: path, Err: err}
	}
	return nil
}

func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// setTimes sets access and modification times without following a symlink. A zero atime
// leaves it equal to mtime.
func setTimes(path string, atime, mtime time.Time) error {
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}

// inodeOf returns the identity and link count of a node.
func inodeOf(fi fs.FileInfo) (inodeKey, uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeKey{}, 1
	}
	return inodeKey{uint64(st.Dev), st.Ino}, uint64(st.Nlink)
}

// syncFS flushes the file system holding path to disk.
func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", path, err)
	}
	return nil
}

// writeRegular creates path (which must not exist), fills it from r and sets the metadata
// attribute and times through the open descriptor: one open, no path lookups after it, and
// no poller registration (os.OpenFile tries epoll for every file).
func writeRegular(path string, r io.Reader, buf []byte, attr string, meta []byte, atime, mtime time.Time) (int64, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o755)
	if err != nil {
		return 0, &os.PathError{Op: "create", Path: path, Err: err}
	}
	closed := false
	defer func() {
		if !closed {
			unix.Close(fd)
		}
	}()
	var n int64
	for {
		m, rerr := r.Read(buf)
		for off := 0; off < m; {
			w, err := unix.Write(fd, buf[off:m])
			if err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return n, &os.PathError{Op: "write", Path: path, Err: err}
			}
			off += w
		}
		n += int64(m)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, rerr
		}
	}
	if err := unix.Fsetxattr(fd, attr, meta, 0); err != nil {
		return n, &os.PathError{Op: "fsetxattr " + attr, Path: path, Err: err}
	}
	if atime.IsZero() {
		atime = mtime
	}
	ts := [2]unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	// futimens(3) is utimensat(fd, NULL, times, 0); x/sys only offers the form with a path.
	if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); errno != 0 {
		return n, &os.PathError{Op: "futimens", Path: path, Err: errno}
	}
	closed = true
	if err := unix.Close(fd); err != nil {
		return n, &os.PathError{Op: "close", Path: path, Err: err}
	}
	return n, nil
}
