package wclayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/Microsoft/go-winio"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// VHDX files of Windows layers, as HCS, hcsshim (internal/wclayer/legacy.go) and containerd's
// windows snapshotter name them.
const (
	// ScratchVHDX is a writable layer's disk: a container's scratch, or a utility VM's.
	ScratchVHDX = "sandbox.vhdx"
	// scratchTemplate is made in every base layer at import (ProcessBaseLayer): a differencing
	// disk over blank-base.vhdx that containerd copies as each container's scratch.
	scratchTemplate = "blank.vhdx"
	// uvmScratchTemplate is made in a base layer's UtilityVM/ at import (ProcessUtilityVMImage)
	// and copied as a utility VM's scratch.
	uvmScratchTemplate = "SystemTemplate.vhdx"
)

// CreateScratch makes the scratch disk of a writable layer over parents (nearest first): a copy
// of the base layer's blank.vhdx as scratch\sandbox.vhdx, as containerd's windows snapshotter
// does (createScratchLayer), or, for a base layer without the template (imported by an older
// Windows), vmcompute's CreateSandboxLayer through hcsshim.CreateScratchLayer. A non-zero size
// grows the disk's volume to that many bytes (hcsshim.ExpandScratchSize, as containerd does for
// the rootfs size labels); the default is the template's (20 GB).
func (l *Layers) CreateScratch(ctx context.Context, scratch string, parents []string, sizeBytes uint64) error {
	scratch = filepath.Clean(scratch)
	if len(parents) == 0 {
		return fmt.Errorf("creating scratch %s: a scratch layer needs parent layers: %w", scratch, errdefs.ErrInvalidArgument)
	}
	base := parents[len(parents)-1]
	template := filepath.Join(base, scratchTemplate)
	err := copyFile(template, filepath.Join(scratch, ScratchVHDX))
	switch {
	case errors.Is(err, os.ErrNotExist):
		log.G(ctx).WithField("base", base).Debug("base layer has no blank.vhdx: creating the scratch with CreateScratchLayer")
		if err := l.api.CreateScratchLayer(scratch, parents); err != nil {
			return fmt.Errorf("creating scratch %s over base layer %s: %w", scratch, base, err)
		}
	case err != nil:
		return fmt.Errorf("creating scratch %s: %w", scratch, err)
	}
	if sizeBytes != 0 {
		if err := l.api.ExpandScratchSize(scratch, sizeBytes); err != nil {
			return fmt.Errorf("expanding scratch %s to %d bytes: %w", scratch, sizeBytes, err)
		}
	}
	return nil
}

// CreateUVMScratch makes a utility VM's scratch disk in the folder dir: a copy of the base
// layer's UtilityVM\SystemTemplate.vhdx as dir\sandbox.vhdx, as containerd's windows snapshotter
// does (createUVMScratchLayer). The base layer (last of parents) must have a UtilityVM folder.
func (l *Layers) CreateUVMScratch(ctx context.Context, dir string, parents []string) error {
	if len(parents) == 0 {
		return fmt.Errorf("creating utility VM scratch %s: it needs parent layers: %w", dir, errdefs.ErrInvalidArgument)
	}
	base := parents[len(parents)-1]
	template := filepath.Join(base, UtilityVMDir, uvmScratchTemplate)
	if _, err := os.Stat(template); err != nil {
		return fmt.Errorf("creating utility VM scratch %s: base layer %s has no %s: %w", dir, base, filepath.Join(UtilityVMDir, uvmScratchTemplate), errdefs.ErrFailedPrecondition)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating utility VM scratch %s: %w", dir, err)
	}
	if err := copyFile(template, filepath.Join(dir, ScratchVHDX)); err != nil {
		return fmt.Errorf("creating utility VM scratch %s: %w", dir, err)
	}
	log.G(ctx).WithFields(log.Fields{"dir": dir, "base": base}).Debug("created utility VM scratch")
	return nil
}

// copyFile copies src to a new file dst; a failed copy leaves no dst.
func copyFile(src, dst string) (retErr error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); retErr == nil && cerr != nil {
			retErr = cerr
		}
		if retErr != nil {
			_ = os.Remove(dst)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}

// ConvertScratchToLayer turns a writable layer into a read-only one in place, as containerd's
// windows snapshotter does at Commit: a layer without parents is processed into a base layer
// (hcsshim.ConvertToBaseLayer: hives, blank.vhdx, the UtilityVM image); a scratch over parents
// is exported from its sandbox.vhdx and imported over its own folder (convertScratchToReadOnlyLayer),
// so its files are on disk where parent layers must have them. As in containerd, the
// sandbox.vhdx stays: ociwclayer's export of the layer reads it later.
func (l *Layers) ConvertScratchToLayer(ctx context.Context, scratch string, parents []string) (retErr error) {
	scratch = filepath.Clean(scratch)
	if err := l.privileges(); err != nil {
		return fmt.Errorf("converting scratch %s: %w", scratch, err)
	}
	if mounted, err := l.isMounted(scratch); err != nil {
		return fmt.Errorf("converting scratch %s: %w", scratch, err)
	} else if mounted {
		return fmt.Errorf("converting scratch %s: it is mounted (in use by a container): %w", scratch, errdefs.ErrFailedPrecondition)
	}
	if len(parents) == 0 {
		if err := l.api.ConvertToBaseLayer(scratch); err != nil {
			return fmt.Errorf("converting %s into a base layer: %w", scratch, err)
		}
		return nil
	}
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	go func() {
		err := l.api.ExportLayerToTar(ctx, pw, scratch, parents)
		pw.CloseWithError(err)
		exported <- err
	}()
	// SeSecurityPrivilege: see importWindows.
	ierr := l.api.RunWithPrivileges([]string{winio.SeSecurityPrivilege}, func() error {
		_, err := l.api.ImportLayerFromTar(ctx, pr, scratch, parents)
		return err
	})
	if ierr == nil {
		// The end of the tar may not have been read by the importer.
		_, ierr = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errImporterDone)
	eerr := <-exported
	switch {
	case eerr != nil && !errors.Is(eerr, errImporterDone):
		return fmt.Errorf("converting scratch %s: exporting its changes: %w", scratch, eerr)
	case ierr != nil:
		return fmt.Errorf("converting scratch %s: importing its changes: %w", scratch, ierr)
	}
	return nil
}

// DestroyLayer deletes a layer folder with vmcompute's DestroyLayer, which also removes files
// that the backup APIs wrote with security descriptors that deny the caller (os.RemoveAll
// fails on them). A folder that does not exist is not an error.
func (l *Layers) DestroyLayer(ctx context.Context, layer string) error {
	if err := l.destroyLayer(filepath.Clean(layer)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	log.G(ctx).WithField("path", layer).Debug("destroyed layer")
	return nil
}

func (l *Layers) destroyLayer(layer string) error {
	if _, err := os.Lstat(layer); err != nil {
		return err
	}
	if err := l.api.DestroyLayer(layer); err != nil {
		return fmt.Errorf("destroying layer %s: %w", layer, err)
	}
	return nil
}
