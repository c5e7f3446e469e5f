package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/wclayer"
)

// Under the emulator a scratch layer is a folder: Files/ is the overlayfs upper directory once
// the shim mounts it (see doc.go). scratch_windows.go makes the VHDX scratch of real Windows.
// Beside Files/ the folder holds sandbox.vhdx, as on Windows, in hcsemu's emulated format
// (package internal/emuvhdx) naming the folder itself as its file system: a Hyper-V isolated container's
// scratch reaches its utility VM as that disk on SCSI (hcsshim attaches <scratch>\sandbox.vhdx),
// and it is the same Files/ a process-isolated container writes.

// emulatedScratchDisk is the disk file of a scratch layer, named as on Windows.
const emulatedScratchDisk = "sandbox.vhdx"

// Default virtual sizes of the emulated disks, when no label asks for another: 20 GB for a
// container's scratch and 10 GB for a utility VM's (containerd/containerd#4912).
const (
	defaultScratchBytes    = 20 << 30
	defaultUVMScratchBytes = 10 << 30
)

// writeScratchDisk writes the emulated sandbox.vhdx of the scratch folder dir.
func writeScratchDisk(dir string, size uint64) error {
	p := filepath.Join(dir, emulatedScratchDisk)
	if err := os.WriteFile(p, emuvhdx.Encode(size, "."), 0o644); err != nil {
		return fmt.Errorf("writing the scratch disk %s: %w", p, err)
	}
	return nil
}

// prepareScratch makes the scratch of the active snapshot key in its folder dir, over parents
// (nearest first).
func (s *Snapshotter) prepareScratch(ctx context.Context, key, dir string, parents []string, labels map[string]string, size uint64) error {
	if err := os.Mkdir(wclayer.FilesPath(dir), 0o755); err != nil {
		return fmt.Errorf("creating scratch of snapshot %q: %w", key, err)
	}
	if len(parents) > 0 {
		if err := wclayer.WriteLayerChain(dir, parents); err != nil {
			return fmt.Errorf("snapshot %q: %w", key, err)
		}
	}
	diskSize := size
	if diskSize == 0 {
		diskSize = defaultScratchBytes
	}
	if err := writeScratchDisk(dir, diskSize); err != nil {
		return fmt.Errorf("snapshot %q: %w", key, err)
	}
	if _, ok := labels[LabelUVMScratch]; ok {
		if err := makeUVMScratch(dir, parents); err != nil {
			return fmt.Errorf("snapshot %q: %w", key, err)
		}
	}
	if size != 0 {
		// A folder scratch has no size of its own; recorded in the labels, nothing to
		// set under the emulator.
		log.G(ctx).WithFields(log.Fields{"key": key, "bytes": size}).Debug("scratch size requested")
	}
	return nil
}

// makeUVMScratch makes the utility VM's scratch layer: containerd copies the base layer's
// UtilityVM/SystemTemplate.vhdx to vm/sandbox.vhdx; a folder scratch is vm/Files.
func makeUVMScratch(dir string, parents []string) error {
	if len(parents) == 0 {
		return fmt.Errorf("label %s needs parent layers: %w", LabelUVMScratch, errdefs.ErrInvalidArgument)
	}
	base := parents[len(parents)-1]
	if _, err := os.Stat(filepath.Join(base, wclayer.UtilityVMDir)); err != nil {
		return fmt.Errorf("label %s: base layer %s has no %s folder: %w", LabelUVMScratch, base, wclayer.UtilityVMDir, errdefs.ErrFailedPrecondition)
	}
	vm := filepath.Join(dir, UVMScratchDir)
	if err := os.MkdirAll(wclayer.FilesPath(vm), 0o755); err != nil {
		return fmt.Errorf("creating utility VM scratch: %w", err)
	}
	if err := writeScratchDisk(vm, defaultUVMScratchBytes); err != nil {
		return err
	}
	return wclayer.WriteLayerChain(vm, []string{filepath.Join(base, wclayer.UtilityVMDir)})
}

// commitScratch readies the unmounted scratch folder of key for Commit. The folder is already a
// layer: only the overlayfs work folder and mount point go.
func (s *Snapshotter) commitScratch(ctx context.Context, key, dir string) error {
	for _, leftover := range []string{"work", "volume", ".mount.lock", emulatedScratchDisk} {
		if err := os.RemoveAll(filepath.Join(dir, leftover)); err != nil {
			return fmt.Errorf("committing snapshot %q: %w", key, err)
		}
	}
	return nil
}

// diskUsage measures what a snapshot holds: its Files/ and its utility VM scratch, not the
// volume mounted inside its folder while a container runs.
func diskUsage(ctx context.Context, dir string) (fs.Usage, error) {
	roots := []string{wclayer.FilesPath(dir)}
	for _, extra := range []string{wclayer.HivesDir, wclayer.UtilityVMDir, UVMScratchDir} {
		if _, err := os.Stat(filepath.Join(dir, extra)); err == nil {
			roots = append(roots, filepath.Join(dir, extra))
		}
	}
	if _, err := os.Stat(roots[0]); errors.Is(err, os.ErrNotExist) {
		roots = roots[1:] // a view
	}
	return fs.DiskUsage(ctx, roots...)
}

// removeLayerDir deletes a snapshot folder (not mounted).
func (s *Snapshotter) removeLayerDir(ctx context.Context, dir string) error {
	return os.RemoveAll(dir)
}
