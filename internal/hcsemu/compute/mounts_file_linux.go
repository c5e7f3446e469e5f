package compute

import (
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// mapFileLocked maps one host file at md.ContainerPath (a file path). A process-isolated
// container gets it straight from the host (hcsshim sends a file mount as a MappedDirectory whose
// HostPath is the file: internal/hcsoci/hcsdoc_wcow.go createMountsConfig); a container in a
// utility VM through a VSMB share with RestrictFileAccess and SingleFileMapping (HostPath is the
// share path of the file). It is mapLocked for
// a file: the target is created (empty) and opened through the volume's os.Root, and the file's
// bind mount is attached to that descriptor, read-only first when asked.
func (s *system) mapFileLocked(md schema2.MappedDirectory) error {
	key := mappedKey(md.ContainerPath)
	if key == "" {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q: cannot map a file over the root of C:", md.ContainerPath)
	}
	if _, ok := s.mapped[key]; ok {
		return hresult.Errorf(computecore.HCS_E_SYSTEM_ALREADY_EXISTS, "ContainerPath: %q is already mapped in compute system %q", md.ContainerPath, s.id)
	}
	rel, _ := winToRel(md.ContainerPath)
	onDisk, fi, err := s.vol.lookup(rel)
	if err != nil {
		dir, file := path.Split(rel)
		if dir != "" {
			if err := s.vol.root.MkdirAll(path.Clean(dir), 0o755); err != nil {
				return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: create the folder of %q in compute system %q: %v", md.ContainerPath, s.id, err)
			}
		}
		f, err := s.vol.root.OpenFile(path.Join(path.Clean(dir), file), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: create %q in compute system %q: %v", md.ContainerPath, s.id, err)
		}
		f.Close()
		onDisk = rel
	} else if !fi.Mode().IsRegular() {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q is not a file in compute system %q (the host path is one)", md.ContainerPath, s.id)
	}
	target, err := s.vol.root.Open(onDisk)
	if err != nil {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: open %q in compute system %q: %v", md.ContainerPath, s.id, err)
	}
	defer target.Close()
	if fi, err := target.Stat(); err != nil || !fi.Mode().IsRegular() {
		return hresult.Errorf(computecore.E_INVALIDARG, "ContainerPath: %q is not a file in compute system %q", md.ContainerPath, s.id)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, md.HostPath, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "HostPath: bind %q at %q: %v", md.HostPath, md.ContainerPath, err)
	}
	defer unix.Close(tree)
	if md.ReadOnly {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "ReadOnly: make the mapping of %q read-only: %v", md.ContainerPath, err)
		}
	}
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "HostPath: bind %q at %q: %v", md.HostPath, md.ContainerPath, err)
	}
	root, err := s.vol.root.Open(onDisk)
	if err == nil && !sameMount(root, tree) {
		root.Close()
		err = fmt.Errorf("the file changed while it was mapped")
	}
	if err != nil {
		_ = unix.Unmount(fdPath(target), unix.MNT_DETACH)
		return hresult.Errorf(computecore.E_FAIL, "ContainerPath: map %q in compute system %q: %v", md.ContainerPath, s.id, err)
	}
	s.mapped[key] = &mappedDir{md: md, root: root}
	return nil
}
