package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/core/snapshots/storage"
	"github.com/containerd/continuity/fs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// On Windows a snapshot folder is what containerd's built-in windows snapshotter
// (plugins/snapshots/windows in containerd v2.4.2) makes, so that layers, scratch disks and the
// mounts that name them are interchangeable with it:
//
//   - an unpack snapshot (key containing snapshots.UnpackKeyPrefix) is an empty folder that the
//     differ's Apply imports a layer into;
//   - an active snapshot without parents is a new base layer: an empty Files/;
//   - any other active snapshot is a scratch layer: sandbox.vhdx, a copy of the base layer's
//     blank.vhdx grown to the rootfs size labels, beside vm\sandbox.vhdx when the utility VM
//     scratch label is set;
//   - a view is an empty folder mounted read-only over its parents.

// prepareScratch makes the scratch of the active snapshot key in its folder dir, over parents
// (nearest first), as containerd's createSnapshot does.
func (s *Snapshotter) prepareScratch(ctx context.Context, key, dir string, parents []string, labels map[string]string, size uint64) error {
	if strings.Contains(key, snapshots.UnpackKeyPrefix) {
		// Apply writes the whole layer here; a scratch disk would only be in its way.
		return nil
	}
	if len(parents) == 0 {
		if err := os.Mkdir(wclayer.FilesPath(dir), 0o755); err != nil {
			return fmt.Errorf("creating base layer folder of snapshot %q: %w", key, err)
		}
		return nil
	}
	// vmcompute's CreateSandboxLayer writes layerchain.json in a scratch too; ExportLayer reads
	// the parents from it (Compare of an active snapshot).
	if err := wclayer.WriteLayerChain(dir, parents); err != nil {
		return fmt.Errorf("snapshot %q: %w", key, err)
	}
	// The utility VM scratch goes first, into vm\, so that it cannot clash with the
	// container's sandbox.vhdx (containerd's comment on the same order).
	if _, ok := labels[LabelUVMScratch]; ok {
		if err := s.layers.CreateUVMScratch(ctx, filepath.Join(dir, UVMScratchDir), parents); err != nil {
			return fmt.Errorf("snapshot %q: label %s: %w", key, LabelUVMScratch, err)
		}
	}
	if err := s.layers.CreateScratch(ctx, dir, parents, size); err != nil {
		return fmt.Errorf("snapshot %q: %w", key, err)
	}
	if size != 0 {
		log.G(ctx).WithFields(log.Fields{"key": key, "bytes": size}).Debug("scratch expanded")
	}
	return nil
}

// commitScratch turns the unmounted scratch of key into a read-only layer, as containerd's
// Commit does: an unpack snapshot already is one (Apply imported it); a parentless one is
// processed into a base layer, a scratch over parents re-imported from its sandbox.vhdx. It runs
// inside Commit's metadata transaction, which ctx carries.
func (s *Snapshotter) commitScratch(ctx context.Context, key, dir string) error {
	if !strings.Contains(key, snapshots.UnpackKeyPrefix) {
		sn, err := storage.GetSnapshot(ctx, key)
		if err != nil {
			return fmt.Errorf("committing snapshot %q: %w", key, err)
		}
		if err := s.layers.ConvertScratchToLayer(ctx, dir, s.parentPaths(sn.ParentIDs)); err != nil {
			return fmt.Errorf("committing snapshot %q: %w", key, err)
		}
	}
	// Clear a stale mount record (the snapshot is not mounted: Commit checked), then the lock
	// file that Unmount leaves.
	if err := s.layers.Unmount(ctx, dir); err != nil {
		return fmt.Errorf("committing snapshot %q: %w", key, err)
	}
	if err := os.Remove(filepath.Join(dir, ".mount.lock")); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("committing snapshot %q: %w", key, err)
	}
	return nil
}

// diskUsage measures the whole snapshot folder, scratch disks included, as containerd's windows
// snapshotter does: on Windows nothing is mounted inside it (the volume is \\?\Volume{...}).
func diskUsage(ctx context.Context, dir string) (fs.Usage, error) {
	return fs.DiskUsage(ctx, dir)
}

// removeLayerDir deletes a snapshot folder with vmcompute's DestroyLayer, as containerd's
// Remove does: files imported with the backup APIs can carry security descriptors that make
// os.RemoveAll fail.
func (s *Snapshotter) removeLayerDir(ctx context.Context, dir string) error {
	return s.layers.DestroyLayer(ctx, dir)
}
