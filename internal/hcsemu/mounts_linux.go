package hcsemu

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// mappedDir is a host directory bind-mounted into a container's volume.
type mappedDir struct {
	md     schema2.MappedDirectory
	target string // on the host: inside Container.Storage.Path
}

func mappedKey(containerPath string) string {
	rel, _ := winToRel(containerPath)
	return strings.ToLower(rel)
}

// mapLocked bind-mounts md.HostPath at md.ContainerPath inside the volume, creating the target
// folder when it is missing (HCS creates it too), read-only when asked.
func (s *system) mapLocked(md schema2.MappedDirectory) error {
	key := mappedKey(md.ContainerPath)
	if key == "" {
		return errorf(computecore.E_INVALIDARG, "ContainerPath: %q: cannot map over the root of C:", md.ContainerPath)
	}
	if _, ok := s.mapped[key]; ok {
		return errorf(computecore.HCS_E_SYSTEM_ALREADY_EXISTS, "ContainerPath: %q is already mapped in compute system %q", md.ContainerPath, s.id)
	}
	rel, _ := winToRel(md.ContainerPath)
	onDisk, fi, err := s.vol.lookup(rel)
	if err != nil {
		if err := s.vol.root.MkdirAll(rel, 0o755); err != nil {
			return errorf(computecore.E_PATH_NOT_FOUND, "ContainerPath: create %q in compute system %q: %v", md.ContainerPath, s.id, err)
		}
		onDisk = rel
	} else if !fi.IsDir() {
		return errorf(computecore.E_INVALIDARG, "ContainerPath: %q is not a directory in compute system %q", md.ContainerPath, s.id)
	}
	target := filepath.Join(s.volPath, filepath.FromSlash(onDisk))
	if err := unix.Mount(md.HostPath, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return errorf(computecore.E_FAIL, "HostPath: bind %q at %q: %v", md.HostPath, md.ContainerPath, err)
	}
	if md.ReadOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			unix.Unmount(target, unix.MNT_DETACH)
			return errorf(computecore.E_FAIL, "ReadOnly: remount %q read-only: %v", md.ContainerPath, err)
		}
	}
	s.mapped[key] = &mappedDir{md: md, target: target}
	return nil
}

func (s *system) unmapLocked(ctx context.Context, containerPath string) error {
	key := mappedKey(containerPath)
	m, ok := s.mapped[key]
	if !ok {
		return errorf(computecore.E_ELEMENT_NOT_FOUND, "ContainerPath: %q is not mapped in compute system %q", containerPath, s.id)
	}
	delete(s.mapped, key)
	// Detach: a process of the container may still have files open under it.
	if err := unix.Unmount(m.target, unix.MNT_DETACH); err != nil {
		return errorf(computecore.E_FAIL, "unmount %q from compute system %q: %v", containerPath, s.id, err)
	}
	return nil
}

func (s *system) unmapAllLocked(ctx context.Context) {
	for key, m := range s.mapped {
		if err := unix.Unmount(m.target, unix.MNT_DETACH); err != nil {
			log.G(ctx).WithError(err).WithFields(log.Fields{"system": s.id, "target": m.target}).Warn("hcsemu: unmount mapped directory")
		}
		delete(s.mapped, key)
	}
}
