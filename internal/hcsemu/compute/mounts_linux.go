package compute

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// mappedDir is a host directory bind-mounted into a container's volume.
type mappedDir struct {
	md schema2.MappedDirectory
	// root is the mount's root, opened through the volume when it was made; it names the mount
	// for the unmount whatever the container did to the path since.
	root *os.File
}

func mappedKey(containerPath string) string {
	rel, _ := winToRel(containerPath)
	return strings.ToLower(rel)
}

// mapLocked bind-mounts md.HostPath at md.ContainerPath inside the volume, creating the target
// folder when it is missing (HCS creates it too), read-only when asked.
//
// The volume is the container's own C:, which its processes change while this runs: a folder on
// the way to the target can become a symlink to anywhere on the host between the lookup and
// the mount. So the target is opened through the volume's os.Root (which never leaves the
// volume) and the mount is attached to that open folder (open_tree, then move_mount onto the
// descriptor), never to a path; a read-only mapping is made read-only before it is attached,
// so it is never writable, not even for a moment.
func (s *system) mapLocked(md schema2.MappedDirectory) error {
	// A single file: a file mount of a process-isolated container, or one shared into the VM
	// (hosted_linux.go); see mapFileLocked.
	if fi, err := os.Stat(md.HostPath); err == nil && fi.Mode().IsRegular() {
		return s.mapFileLocked(md)
	}
	key := mappedKey(md.ContainerPath)
	if key == "" {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q: cannot map over the root of C:", md.ContainerPath)
	}
	if _, ok := s.mapped[key]; ok {
		return hresult.Errorf(computecore.HCS_E_SYSTEM_ALREADY_EXISTS, "ContainerPath: %q is already mapped in compute system %q", md.ContainerPath, s.id)
	}
	rel, _ := winToRel(md.ContainerPath)
	onDisk, fi, err := s.vol.lookup(rel)
	if err != nil {
		if err := s.vol.root.MkdirAll(rel, 0o755); err != nil {
			return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: create %q in compute system %q: %v", md.ContainerPath, s.id, err)
		}
		onDisk = rel
	} else if !fi.IsDir() {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q is not a directory in compute system %q", md.ContainerPath, s.id)
	}
	target, err := s.vol.root.Open(onDisk)
	if err != nil {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: open %q in compute system %q: %v", md.ContainerPath, s.id, err)
	}
	defer target.Close()
	if fi, err := target.Stat(); err != nil || !fi.IsDir() {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q is not a directory in compute system %q", md.ContainerPath, s.id)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, md.HostPath, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "HostPath: bind %q at %q: %v", md.HostPath, md.ContainerPath, err)
	}
	defer unix.Close(tree)
	if md.ReadOnly {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "ReadOnly: make the mapping of %q read-only: %v", md.ContainerPath, err)
		}
	}
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "HostPath: bind %q at %q: %v", md.HostPath, md.ContainerPath, err)
	}
	// Opened again, the path now ends in the new mount: that descriptor names it from now on.
	root, err := s.vol.root.Open(onDisk)
	if err == nil && !sameMount(root, tree) {
		root.Close()
		err = fmt.Errorf("the folder changed while it was mapped")
	}
	if err != nil {
		// Detach what was attached through the descriptor it was attached to.
		_ = unix.Unmount(fdPath(target), unix.MNT_DETACH)
		return hresult.Errorf(computecore.E_FAIL, "ContainerPath: map %q in compute system %q: %v", md.ContainerPath, s.id, err)
	}
	s.mapped[key] = &mappedDir{md: md, root: root}
	return nil
}

// sameMount reports whether f is the root of the mount tree was attached as (same mount id).
func sameMount(f *os.File, tree int) bool {
	var a, b unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &a) != nil ||
		unix.Statx(tree, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &b) != nil {
		return false
	}
	return a.Mnt_id == b.Mnt_id
}

// fdPath names an open file's own path in /proc; mounting or unmounting there acts on that
// file, however its path changed since it was opened.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// unmount detaches m through the descriptor of its root (a process of the container may still
// have files open under it).
func (m *mappedDir) unmount() error {
	defer m.root.Close()
	return unix.Unmount(fdPath(m.root), unix.MNT_DETACH)
}

func (s *system) unmapLocked(ctx context.Context, containerPath string) error {
	key := mappedKey(containerPath)
	m, ok := s.mapped[key]
	if !ok {
		return hresult.Errorf(computecore.E_ELEMENT_NOT_FOUND, "ContainerPath: %q is not mapped in compute system %q", containerPath, s.id)
	}
	delete(s.mapped, key)
	if err := m.unmount(); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "unmount %q from compute system %q: %v", containerPath, s.id, err)
	}
	return nil
}

func (s *system) unmapAllLocked(ctx context.Context) {
	for key, m := range s.mapped {
		if err := m.unmount(); err != nil {
			log.G(ctx).WithError(err).WithFields(log.Fields{"system": s.id, "container path": m.md.ContainerPath}).Warn("hcsemu: unmount mapped directory")
		}
		delete(s.mapped, key)
	}
}
