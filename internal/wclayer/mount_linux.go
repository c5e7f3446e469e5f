package wclayer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"
)

// mountDataMax is what mount(2) takes as option data: one page.
const mountDataMax = 4096

func (l *Layers) mount(ctx context.Context, scratch string, parents []string) (string, error) {
	scratch = filepath.Clean(scratch)
	target := VolumePath(scratch)
	unlock, err := lockScratch(scratch)
	if err != nil {
		return "", err
	}
	defer unlock()

	if ok, err := l.isMounted(scratch); err != nil {
		return "", err
	} else if ok {
		return target, nil
	}
	lower := make([]string, 0, len(parents))
	for _, p := range parents {
		lp := FilesPath(filepath.Clean(p))
		if strings.ContainsAny(lp, ":,") {
			return "", fmt.Errorf("parent layer path %q has a ':' or ',', which overlayfs options cannot hold: %w", p, errdefs.ErrInvalidArgument)
		}
		if fi, err := os.Stat(lp); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("parent layer %s has no %s folder: %w", p, FilesDir, errdefs.ErrNotFound)
		}
		lower = append(lower, lp)
	}
	upper := FilesPath(scratch)
	_, err = os.Stat(upper)
	rw := err == nil
	if err := os.MkdirAll(target, 0o755); err != nil {
		return "", fmt.Errorf("creating mount point of %s: %w", scratch, err)
	}

	switch {
	case rw && len(lower) == 0:
		// A new base layer: nothing to merge, the volume is the scratch's own Files/.
		err = bind(upper, target, false)
	case !rw && len(lower) == 0:
		return "", fmt.Errorf("layer %s has neither a %s folder nor parents to mount: %w", scratch, FilesDir, errdefs.ErrInvalidArgument)
	case !rw && len(lower) == 1:
		// overlayfs wants two lower directories when it has no upper one.
		err = bind(lower[0], target, true)
	default:
		opts := []string{"index=off", "redirect_dir=off", "metacopy=off"}
		if rw {
			work := filepath.Join(scratch, workDir)
			if err := os.MkdirAll(work, 0o700); err != nil {
				return "", fmt.Errorf("creating overlayfs work folder of %s: %w", scratch, err)
			}
			opts = append(opts, "upperdir="+upper, "workdir="+work)
		}
		err = overlay(target, lower, opts)
	}
	if err != nil {
		return "", fmt.Errorf("mounting layer %s over %d parents: %w", scratch, len(parents), err)
	}
	log.G(ctx).WithFields(log.Fields{"scratch": scratch, "parents": len(parents), "rw": rw}).Debug("mounted layer chain")
	return target, nil
}

// overlay mounts overlayfs at target. Deep chains whose options do not fit in a page go
// through the new mount API, which takes each lower directory separately ("lowerdir+",
// Linux 6.8).
func overlay(target string, lower, opts []string) error {
	data := strings.Join(append([]string{"lowerdir=" + strings.Join(lower, ":")}, opts...), ",")
	if len(data) < mountDataMax {
		if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
			return fmt.Errorf("mount overlay %s (%s): %w", target, data, err)
		}
		return nil
	}
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fd)
	for _, l := range lower {
		if err := unix.FsconfigSetString(fd, "lowerdir+", l); err != nil {
			return fmt.Errorf("overlay lowerdir+ %s: %w", l, err)
		}
	}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		if err := unix.FsconfigSetString(fd, k, v); err != nil {
			return fmt.Errorf("overlay option %s: %w", o, err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fmt.Errorf("creating overlay for %s: %w", target, err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount overlay to %s: %w", target, err)
	}
	return nil
}

func bind(src, target string, ro bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

func (l *Layers) unmount(ctx context.Context, scratch string) error {
	scratch = filepath.Clean(scratch)
	target := VolumePath(scratch)
	unlock, err := lockScratch(scratch)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the scratch folder is gone, so is anything mounted in it
	}
	if err != nil {
		return err
	}
	defer unlock()
	for i := 0; ; i++ {
		ok, err := l.isMounted(scratch)
		if err != nil || !ok {
			return err
		}
		flags := 0
		if i >= 10 {
			// Still busy after a second: detach it so it goes once the last user leaves.
			flags = unix.MNT_DETACH
		}
		err = unix.Unmount(target, flags)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			continue
		case errors.Is(err, unix.EBUSY) && i < 10:
			time.Sleep(100 * time.Millisecond)
		default:
			return fmt.Errorf("unmounting layer %s at %s: %w", scratch, target, err)
		}
		log.G(ctx).WithField("scratch", scratch).Debug("unmount busy, retrying")
	}
}

// isMounted looks the volume path up in /proc/self/mountinfo.
func (*Layers) isMounted(scratch string) (bool, error) {
	target := VolumePath(filepath.Clean(scratch))
	if real, err := filepath.EvalSymlinks(target); err == nil {
		target = real
	} else if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Field 5 is the mount point, with space, tab, newline and backslash octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == target {
			return true, nil
		}
	}
	return false, sc.Err()
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lockScratch serialises Mount and Unmount of one scratch across processes (shims) with an
// flock on a file inside it.
func lockScratch(scratch string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(scratch, ".mount.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking layer %s: %w", scratch, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking layer %s: %w", scratch, err)
	}
	return func() { f.Close() }, nil
}
