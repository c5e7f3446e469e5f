package wclayer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/Microsoft/hcsshim"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/windows"
)

// On Windows the storage filter is wcifs, attached with the legacy layer calls of vmcompute.dll
// through hcsshim's root package, in the order containerd's core/mount (mount_windows.go) and
// hcsshim's internal/layers (mountProcessIsolatedWCIFSLayers) use them:
//
//   - ActivateLayer(scratch) attaches the scratch's sandbox.vhdx and mounts its volume (for a
//     folder layer, a view or a base layer, it makes the folder usable as a layer);
//   - PrepareLayer(scratch, parents) attaches wcifs over it with the parents, nearest first;
//   - GetLayerMountPath(scratch) returns the volume path (\\?\Volume{GUID}\) that a container
//     document names as Container.Storage.Path.
//
// Unmount undoes them in reverse: UnprepareLayer, DeactivateLayer. All of it is held by the
// vmcompute service, not by this process, so the mount outlives the caller until Unmount (or a
// reboot), as Mount's contract requires.
//
// Windows keeps no table of these mounts that a caller can list, so Mount records the volume path
// in a marker file inside the scratch folder, and IsMounted believes a marker only while
// GetLayerMountPath still answers for the layer (after a reboot it does not, and the marker is
// stale).
const mountMarker = ".wcifs-mount"

// mountLockFile serialises Mount and Unmount of one scratch across processes (shims), as on Linux.
const mountLockFile = ".mount.lock"

func (l *Layers) mount(ctx context.Context, scratch string, parents []string) (_ string, retErr error) {
	scratch = filepath.Clean(scratch)
	unlock, err := lockScratch(scratch)
	if err != nil {
		return "", err
	}
	defer unlock()

	marker := filepath.Join(scratch, mountMarker)
	vol, live, err := l.readMarker(ctx, scratch)
	if err != nil {
		return "", err
	}
	if live && vol != "" {
		return vol, nil // ref-free and idempotent, as the contract asks
	}
	if live {
		// A Mount that stopped (crashed) between ActivateLayer and writing the volume path:
		// undo it before starting over.
		if err := l.detach(ctx, scratch, true); err != nil {
			return "", err
		}
	}
	for _, p := range parents {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("mounting layer %s: parent layer folder %s: %w", scratch, p, errdefs.ErrNotFound)
		}
	}
	// The marker goes down empty before anything is attached, so that an Unmount after a crash
	// in the middle knows to detach.
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return "", fmt.Errorf("mounting layer %s: %w", scratch, err)
	}
	if err := l.activateAndPrepare(ctx, scratch, parents); err != nil {
		_ = os.Remove(marker)
		return "", fmt.Errorf("mounting layer %s over %d parents: %w", scratch, len(parents), err)
	}
	defer func() {
		if retErr != nil {
			if err := l.detach(ctx, scratch, false); err != nil {
				log.G(ctx).WithError(err).WithField("scratch", scratch).Warn("undoing failed mount")
			} else {
				_ = os.Remove(marker)
			}
		}
	}()
	vol, err = l.api.GetLayerMountPath(scratch)
	if err != nil {
		return "", fmt.Errorf("mounting layer %s: volume path: %w", scratch, err)
	}
	if vol == "" {
		return "", fmt.Errorf("mounting layer %s: vmcompute returned no volume path", scratch)
	}
	if len(parents) == 0 {
		// A base layer is not merged by wcifs: its volume is the layer folder, whose files are
		// under Files/ (containerd's core/mount does the same, so that the metadata beside
		// Files/ is out of the container's reach).
		vol = filepath.Join(vol, FilesDir)
		if fi, err := os.Stat(vol); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("mounting base layer %s: no %s folder: %w", scratch, FilesDir, errdefs.ErrNotFound)
		}
	}
	if err := os.WriteFile(marker, []byte(vol), 0o600); err != nil {
		return "", fmt.Errorf("mounting layer %s: recording volume path: %w", scratch, err)
	}
	log.G(ctx).WithFields(log.Fields{"scratch": scratch, "parents": len(parents), "volume": vol}).Debug("mounted layer chain")
	return vol, nil
}

// activateAndPrepare runs ActivateLayer and PrepareLayer, retrying the two transient failures
// that hcsshim's internal/layers retries (mountProcessIsolatedWCIFSLayers): ERROR_NOT_READY and
// ERROR_DEVICE_NOT_CONNECTED, observed on Windows Server 2019 when loopback VHDs are mounted
// under load.
func (l *Layers) activateAndPrepare(ctx context.Context, scratch string, parents []string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = l.api.ActivateLayer(scratch); err == nil {
			if err = l.api.PrepareLayer(scratch, parents); err == nil {
				return nil
			}
			err = fmt.Errorf("PrepareLayer: %w", err)
			if derr := l.api.DeactivateLayer(scratch); derr != nil {
				log.G(ctx).WithError(derr).WithField("scratch", scratch).Warn("deactivating layer after failed PrepareLayer")
			}
		} else {
			err = fmt.Errorf("ActivateLayer: %w", err)
		}
		if !transient(err) {
			return err
		}
		log.G(ctx).WithError(err).WithFields(log.Fields{"scratch": scratch, "attempt": attempt + 1}).Warn("retrying layer mount")
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (retry cancelled: %w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

// transient reports the Win32 errors worth a retry. hcsshim's HcsError has no Unwrap, so its
// Err field is looked at directly.
func transient(err error) bool {
	var he *hcsshim.HcsError
	if errors.As(err, &he) {
		err = he.Err
	}
	return errors.Is(err, windows.ERROR_NOT_READY) || errors.Is(err, windows.ERROR_DEVICE_NOT_CONNECTED)
}

func (l *Layers) unmount(ctx context.Context, scratch string) error {
	scratch = filepath.Clean(scratch)
	unlock, err := lockScratch(scratch)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the scratch folder is gone, so is anything mounted from it
	}
	if err != nil {
		return err
	}
	defer unlock()
	marker := filepath.Join(scratch, mountMarker)
	vol, live, err := l.readMarker(ctx, scratch)
	if err != nil {
		return err
	}
	if live {
		if err := l.detach(ctx, scratch, vol == ""); err != nil {
			return err
		}
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unmounting layer %s: %w", scratch, err)
	}
	if live {
		log.G(ctx).WithField("scratch", scratch).Debug("unmounted layer chain")
	}
	return nil
}

// detach runs UnprepareLayer and DeactivateLayer. half says the mount never got past
// ActivateLayer, so an UnprepareLayer failure is expected and ignored.
func (l *Layers) detach(ctx context.Context, scratch string, half bool) error {
	if err := l.api.UnprepareLayer(scratch); err != nil {
		if !half {
			return fmt.Errorf("unmounting layer %s: UnprepareLayer: %w", scratch, err)
		}
		log.G(ctx).WithError(err).WithField("scratch", scratch).Debug("UnprepareLayer of a half-made mount")
	}
	if err := l.api.DeactivateLayer(scratch); err != nil {
		return fmt.Errorf("unmounting layer %s: DeactivateLayer: %w", scratch, err)
	}
	return nil
}

// readMarker returns the volume path Mount recorded ("" for a mount that did not finish) and
// whether the layer is still activated in vmcompute. No marker: not mounted by this package.
func (l *Layers) readMarker(ctx context.Context, scratch string) (vol string, live bool, err error) {
	b, err := os.ReadFile(filepath.Join(scratch, mountMarker))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading mount record of layer %s: %w", scratch, err)
	}
	// Assumption (vmcompute's GetLayerMountPath is undocumented): it fails or answers empty for a
	// layer that is not activated, as after a reboot; containerd and hcsshim call it only
	// after ActivateLayer.
	if p, err := l.api.GetLayerMountPath(scratch); err != nil || p == "" {
		log.G(ctx).WithError(err).WithField("scratch", scratch).Debug("stale mount record: layer not activated")
		return string(b), false, nil
	}
	return string(b), true, nil
}

func (l *Layers) isMounted(scratch string) (bool, error) {
	vol, live, err := l.readMarker(context.Background(), filepath.Clean(scratch))
	return live && vol != "", err
}

// lockScratch takes an exclusive LockFileEx lock on a file inside the scratch folder; closing
// the handle releases it.
func lockScratch(scratch string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(scratch, mountLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking layer %s: %w", scratch, err)
	}
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, ol); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking layer %s: %w", scratch, err)
	}
	return func() {
		_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
		f.Close()
	}, nil
}
