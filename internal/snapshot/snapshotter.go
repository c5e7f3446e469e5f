package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/core/snapshots/storage"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// Labels a client sets on Prepare, as containerd's windows snapshotter reads them.
const (
	// LabelRootfsSizeBytes sets the size of a container's scratch space in bytes.
	LabelRootfsSizeBytes = "containerd.io/snapshot/windows/rootfs.sizebytes"
	// LabelRootfsSizeGB sets it in GB. Deprecated by containerd in favour of
	// LabelRootfsSizeBytes, which wins when both are set.
	LabelRootfsSizeGB = "containerd.io/snapshot/io.microsoft.container.storage.rootfs.size-gb"
	// LabelUVMScratch asks for a utility VM scratch layer beside the container's.
	LabelUVMScratch = "containerd.io/snapshot/io.microsoft.vm.storage.scratch"
)

// UVMScratchDir is the folder of the utility VM scratch layer inside a snapshot ("vm", as
// containerd's windows snapshotter names it).
const UVMScratchDir = "vm"

// Snapshotter is containerd's snapshots.Snapshotter (and snapshots.Cleaner) for Windows layers.
type Snapshotter struct {
	root   string
	ms     *storage.MetaStore
	layers *wclayer.Layers
}

var (
	_ snapshots.Snapshotter = (*Snapshotter)(nil)
	_ snapshots.Cleaner     = (*Snapshotter)(nil)
)

// NewSnapshotter opens (creating if needed) a snapshotter rooted at root, whose layers live on
// layers (wclayer.New(), or a fake's on Windows in tests).
func NewSnapshotter(root string, layers *wclayer.Layers) (*Snapshotter, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("snapshotter root %q: %w", root, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "snapshots"), 0o700); err != nil {
		return nil, fmt.Errorf("creating snapshotter root: %w", err)
	}
	// The root holds every image's files and their metadata: owner-only, also when it was made
	// before with looser permissions (MkdirAll leaves an existing folder as it is). On Windows
	// the folder's ACL decides, which Chmod does not set.
	if runtime.GOOS != "windows" {
		if err := os.Chmod(root, 0o700); err != nil {
			return nil, fmt.Errorf("making snapshotter root %s owner-only: %w", root, err)
		}
	}
	ms, err := storage.NewMetaStore(filepath.Join(root, "metadata.db"))
	if err != nil {
		return nil, fmt.Errorf("opening snapshot metadata in %s: %w", root, err)
	}
	return &Snapshotter{root: root, ms: ms, layers: layers}, nil
}

// Root is the snapshotter's root folder.
func (s *Snapshotter) Root() string { return s.root }

func (s *Snapshotter) dir(id string) string { return filepath.Join(s.root, "snapshots", id) }

func (s *Snapshotter) parentPaths(ids []string) []string {
	paths := make([]string, 0, len(ids))
	for _, id := range ids {
		paths = append(paths, s.dir(id))
	}
	return paths
}

// Stat returns the info of the snapshot key.
func (s *Snapshotter) Stat(ctx context.Context, key string) (info snapshots.Info, err error) {
	err = s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		_, info, _, err = storage.GetInfo(ctx, key)
		return err
	})
	return info, err
}

// Update changes the labels of a snapshot.
func (s *Snapshotter) Update(ctx context.Context, info snapshots.Info, fieldpaths ...string) (_ snapshots.Info, err error) {
	err = s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		info, err = storage.UpdateInfo(ctx, info, fieldpaths...)
		return err
	})
	return info, err
}

// Usage returns the disk usage of a snapshot: measured for an active one, recorded at commit
// for a committed one.
func (s *Snapshotter) Usage(ctx context.Context, key string) (usage snapshots.Usage, err error) {
	var (
		id   string
		info snapshots.Info
	)
	err = s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		id, info, usage, err = storage.GetInfo(ctx, key)
		return err
	})
	if err != nil {
		return snapshots.Usage{}, err
	}
	if info.Kind == snapshots.KindActive {
		du, err := diskUsage(ctx, s.dir(id))
		if err != nil {
			return snapshots.Usage{}, fmt.Errorf("measuring snapshot %q: %w", key, err)
		}
		usage = snapshots.Usage(du)
	}
	return usage, nil
}

// Mounts returns the mounts of an active snapshot or view again.
func (s *Snapshotter) Mounts(ctx context.Context, key string) (_ []mount.Mount, err error) {
	var sn storage.Snapshot
	err = s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		sn, err = storage.GetSnapshot(ctx, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mounts of snapshot %q: %w", key, err)
	}
	return s.mounts(sn), nil
}

func (s *Snapshotter) mounts(sn storage.Snapshot) []mount.Mount {
	return layerMounts(s.dir(sn.ID), s.parentPaths(sn.ParentIDs), sn.Kind == snapshots.KindView)
}

// Prepare creates an active snapshot (a scratch layer) over parent.
func (s *Snapshotter) Prepare(ctx context.Context, key, parent string, opts ...snapshots.Opt) ([]mount.Mount, error) {
	return s.create(ctx, snapshots.KindActive, key, parent, opts)
}

// View creates a read-only view of parent.
func (s *Snapshotter) View(ctx context.Context, key, parent string, opts ...snapshots.Opt) ([]mount.Mount, error) {
	return s.create(ctx, snapshots.KindView, key, parent, opts)
}

func (s *Snapshotter) create(ctx context.Context, kind snapshots.Kind, key, parent string, opts []snapshots.Opt) ([]mount.Mount, error) {
	var info snapshots.Info
	for _, o := range opts {
		if err := o(&info); err != nil {
			return nil, err
		}
	}
	size, err := scratchSize(info.Labels)
	if err != nil {
		return nil, err
	}
	var sn storage.Snapshot
	err = s.ms.WithTransaction(ctx, true, func(ctx context.Context) (retErr error) {
		sn, err = storage.CreateSnapshot(ctx, kind, key, parent, opts...)
		if err != nil {
			return fmt.Errorf("creating snapshot %q over %q: %w", key, parent, err)
		}
		dir := s.dir(sn.ID)
		// The metadata store knows no snapshot with this id, so a folder of that name is
		// the leftover of a create that crashed before its transaction committed (ids are
		// handed out again then). Clear it, mount included.
		if _, err := os.Lstat(dir); err == nil {
			log.G(ctx).WithField("path", dir).Warn("removing leftover snapshot folder")
			if err := s.layers.Unmount(ctx, dir); err != nil && !errdefs.IsNotImplemented(err) {
				return fmt.Errorf("creating snapshot %q: leftover folder %s: %w", key, dir, err)
			}
			if err := s.removeLayerDir(ctx, dir); err != nil {
				return fmt.Errorf("creating snapshot %q: leftover folder %s: %w", key, dir, err)
			}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating folder of snapshot %q: %w", key, err)
		}
		defer func() {
			if retErr != nil {
				_ = os.RemoveAll(dir)
			}
		}()
		if kind == snapshots.KindView {
			return nil // a view writes nothing: it mounts its parents read-only
		}
		return s.prepareScratch(ctx, key, dir, s.parentPaths(sn.ParentIDs), info.Labels, size)
	})
	if err != nil {
		return nil, err
	}
	return s.mounts(sn), nil
}

// scratchSize reads the size labels as containerd's getRequestedScratchSize does.
func scratchSize(labels map[string]string) (uint64, error) {
	var size uint64
	if v, ok := labels[LabelRootfsSizeGB]; ok {
		gb, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("label %s=%q: %w: %w", LabelRootfsSizeGB, v, err, errdefs.ErrInvalidArgument)
		}
		size = gb * 1024 * 1024 * 1024
	}
	if v, ok := labels[LabelRootfsSizeBytes]; ok {
		b, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("label %s=%q: %w: %w", LabelRootfsSizeBytes, v, err, errdefs.ErrInvalidArgument)
		}
		size = b
	}
	return size, nil
}

// inUse refuses to change a snapshot whose storage filter is attached.
func inUse(layers *wclayer.Layers, dir, key, op string) error {
	mounted, err := layers.IsMounted(dir)
	if err != nil {
		return fmt.Errorf("%s snapshot %q: %w", op, key, err)
	}
	if mounted {
		return fmt.Errorf("cannot %s snapshot %q: it is mounted at %s (in use by a container); stop and delete the container first: %w",
			op, key, wclayer.VolumePath(dir), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// Commit turns the active snapshot key into the committed snapshot name. The scratch folder
// is already a layer: only the overlayfs work folder and mount point go.
func (s *Snapshotter) Commit(ctx context.Context, name, key string, opts ...snapshots.Opt) error {
	return s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		id, info, _, err := storage.GetInfo(ctx, key)
		if err != nil {
			return fmt.Errorf("committing snapshot %q: %w", key, err)
		}
		if info.Kind != snapshots.KindActive {
			return fmt.Errorf("committing snapshot %q: it is %v, not active: %w", key, info.Kind, errdefs.ErrFailedPrecondition)
		}
		dir := s.dir(id)
		if err := inUse(s.layers, dir, key, "commit"); err != nil {
			return err
		}
		if err := s.commitScratch(ctx, key, dir); err != nil {
			return err
		}
		usage, err := diskUsage(ctx, dir)
		if err != nil {
			return fmt.Errorf("committing snapshot %q: measuring %s: %w", key, dir, err)
		}
		if _, err := storage.CommitActive(ctx, key, name, snapshots.Usage(usage), opts...); err != nil {
			return fmt.Errorf("committing snapshot %q as %q: %w", key, name, err)
		}
		return nil
	})
}

// Remove deletes a snapshot. It is refused while the snapshot is mounted, and (by the
// metadata store) while it has children.
func (s *Snapshotter) Remove(ctx context.Context, key string) error {
	var removed, dir string
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		id, _, err := storage.Remove(ctx, key)
		if err != nil {
			return fmt.Errorf("removing snapshot %q: %w", key, err)
		}
		dir = s.dir(id)
		if err := inUse(s.layers, dir, key, "remove"); err != nil {
			return err
		}
		// Rename first so the folder is gone from view when the transaction commits; the
		// slow delete happens outside it, and Cleanup finishes it after a crash.
		removed = s.dir("rm-" + id)
		if err := os.Rename(dir, removed); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				removed = ""
				return nil
			}
			return fmt.Errorf("removing snapshot %q: %w", key, err)
		}
		return nil
	})
	if err != nil {
		if removed != "" {
			// The transaction failed after the rename: put the folder back.
			if rerr := os.Rename(removed, dir); rerr != nil {
				log.G(ctx).WithError(rerr).WithField("path", removed).Error("restoring snapshot folder after failed remove")
			}
		}
		return err
	}
	if removed != "" {
		if err := s.removeLayerDir(ctx, removed); err != nil {
			log.G(ctx).WithError(err).WithField("path", removed).Warn("deleting removed snapshot folder; Cleanup will retry")
		}
	}
	return nil
}

// Walk calls fn for each snapshot matching the filters.
func (s *Snapshotter) Walk(ctx context.Context, fn snapshots.WalkFunc, filters ...string) error {
	return s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		return storage.WalkInfo(ctx, fn, filters...)
	})
}

// cleanupGrace spares recent dot-folders: ImportLayer's temporary folders of imports under
// way.
const cleanupGrace = time.Hour

// Cleanup deletes folders in the snapshot root that no snapshot owns: leftovers of removes
// and of interrupted imports. Mounted folders are left alone.
func (s *Snapshotter) Cleanup(ctx context.Context) error {
	var (
		ids  map[string]string
		ents []os.DirEntry
	)
	// A write transaction, held while the folders are listed, as containerd's overlay
	// snapshotter does (cleanupDirectories): a create commits its id and makes its folder in
	// one write transaction, so no create can be half way while the list is taken. With a read
	// transaction a folder made by a create committing meanwhile was listed without its id and
	// removed under a live snapshot (seen in test/e2e TestFaults: "locking layer …/.mount.lock:
	// no such file or directory" at the next task create).
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		var err error
		if ids, err = storage.IDMap(ctx); err != nil {
			return err
		}
		ents, err = os.ReadDir(filepath.Join(s.root, "snapshots"))
		return err
	})
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	for _, e := range ents {
		if _, ok := ids[e.Name()]; ok {
			continue
		}
		p := filepath.Join(s.root, "snapshots", e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < cleanupGrace {
				continue
			}
		}
		if mounted, err := s.layers.IsMounted(p); err != nil || mounted {
			log.G(ctx).WithField("path", p).Warn("cleanup: leaving mounted snapshot folder")
			continue
		}
		log.G(ctx).WithField("path", p).Debug("cleanup: removing")
		if err := s.removeLayerDir(ctx, p); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
	}
	return nil
}

// Close closes the metadata store.
func (s *Snapshotter) Close() error { return s.ms.Close() }
