package storage

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The layer functions of vmcompute.dll that work on layer folders rather than on the filter:
// scratch disks, base image processing, removal. Their effects are the emulator's layout of what
// Windows writes (volumes.go: the emulated VHDX).

// CreateSandbox is CreateSandboxLayer: a new scratch disk in the layer folder (created if
// missing; its parent folder must exist), with the layer chain beside it, as
// hcsshim.CreateScratchLayer leaves them.
func (f *Filter) CreateSandbox(ctx context.Context, a wire.LayerArgs) error {
	if !filepath.IsAbs(a.Path) {
		return hresult.Errorf(computecore.E_INVALIDARG, "Path: %q is not an absolute path", a.Path)
	}
	p := filepath.Clean(a.Path)
	if _, err := layerFolder("Path", filepath.Dir(p)); err != nil {
		return err
	}
	if len(a.Parents) == 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "Parents: a sandbox layer needs its parent layers")
	}
	if _, err := layerParents(a.Parents); err != nil {
		return err
	}
	disk := filepath.Join(p, ScratchDisk)
	if _, err := os.Lstat(disk); err == nil {
		return hresult.Errorf(hresult.ErrFileExists, "Path: layer %q already has a %s", p, ScratchDisk)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: creating %q: %v", p, err)
	}
	chain, _ := json.Marshal(a.Parents)
	if err := atomicfile.WriteFile(filepath.Join(p, "layerchain.json"), chain, 0o644); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: writing the layer chain of %q: %v", p, err)
	}
	if err := writeVHDX(disk, defaultVHDXSize); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: creating %s: %v", disk, err)
	}
	log.G(ctx).WithField("layer", p).Info("hcsemu: sandbox layer created")
	return nil
}

// ExpandSandbox is ExpandSandboxSize: the layer's scratch disk grows to Size bytes.
// Assumption: a size below the disk's current one is refused with E_INVALIDARG (a VHDX cannot
// shrink by expansion; ResizeVirtualDisk documents shrinking as a separate operation).
func (f *Filter) ExpandSandbox(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	disk := filepath.Join(p, ScratchDisk)
	h, err := ReadVHDX(disk)
	if err != nil {
		return err
	}
	if a.Size < h.VirtualSize {
		return hresult.Errorf(computecore.E_INVALIDARG, "Size: %d bytes is less than the %d bytes of %s", a.Size, h.VirtualSize, disk)
	}
	if err := writeVHDX(disk, a.Size); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Size: resizing %s: %v", disk, err)
	}
	return nil
}

// Destroy is DestroyLayer: the folder and all in it go. Assumption: an activated layer is
// refused with ERROR_BUSY (its disk and files are in use by the filter on Windows).
func (f *Filter) Destroy(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	if f.active(p) {
		return hresult.Errorf(hresult.ErrBusy, "Path: layer %q is activated", p)
	}
	if err := os.RemoveAll(p); err != nil {
		return hresult.Errorf(computecore.E_ACCESSDENIED, "Path: removing %q: %v", p, err)
	}
	log.G(ctx).WithField("layer", p).Info("hcsemu: layer destroyed")
	return nil
}

// Exists is LayerExists: whether the layer folder is there.
func (f *Filter) Exists(ctx context.Context, a wire.LayerArgs) (wire.LayerExistsReply, error) {
	if !filepath.IsAbs(a.Path) {
		return wire.LayerExistsReply{}, hresult.Errorf(computecore.E_INVALIDARG, "Path: %q is not an absolute path", a.Path)
	}
	fi, err := os.Stat(a.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return wire.LayerExistsReply{}, nil
	}
	if err != nil {
		return wire.LayerExistsReply{}, hresult.Errorf(computecore.E_ACCESSDENIED, "Path: %q: %v", a.Path, err)
	}
	return wire.LayerExistsReply{Exists: fi.IsDir()}, nil
}

// ProcessBaseImage post-processes an imported base layer as Windows does
// (hcsshim.ProcessBaseLayer, called when a base layer's import ends): it makes the scratch
// templates blank-base.vhdx and blank.vhdx in the layer folder, which containerd copies as each
// container's sandbox.vhdx. The layer must have its Files folder.
func (f *Filter) ProcessBaseImage(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(p, "Files")); err != nil || !fi.IsDir() {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "Path: base layer %q has no Files folder", p)
	}
	for _, n := range []string{"blank-base.vhdx", "blank.vhdx"} {
		if err := writeVHDX(filepath.Join(p, n), defaultVHDXSize); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "Path: creating %s in %q: %v", n, p, err)
		}
	}
	return nil
}

// ProcessUtilityImage post-processes a base layer's UtilityVM folder (hcsshim's
// ProcessUtilityVMImage): it makes SystemTemplateBase.vhdx and SystemTemplate.vhdx there, the
// latter copied as a utility VM's scratch. The folder must have its Files folder.
func (f *Filter) ProcessUtilityImage(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(p, "Files")); err != nil || !fi.IsDir() {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "Path: utility VM image %q has no Files folder", p)
	}
	for _, n := range []string{"SystemTemplateBase.vhdx", "SystemTemplate.vhdx"} {
		if err := writeVHDX(filepath.Join(p, n), defaultVHDXSize); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "Path: creating %s in %q: %v", n, p, err)
		}
	}
	return nil
}

// GrantVMAccess is GrantVmAccess: on Windows it adds the utility VM's SID to the file's
// security descriptor. The emulator has no per-VM identities; it checks what Windows would.
func (f *Filter) GrantVMAccess(ctx context.Context, a wire.GrantVmAccessArgs) error {
	if a.VMID == "" {
		return hresult.Errorf(computecore.E_INVALIDARG, "VmId: no utility VM id")
	}
	if !filepath.IsAbs(a.Path) {
		return hresult.Errorf(computecore.E_INVALIDARG, "FilePath: %q is not an absolute path", a.Path)
	}
	if _, err := os.Stat(a.Path); err != nil {
		return hresult.Errorf(computecore.E_FILE_NOT_FOUND, "FilePath: %q: %v", a.Path, err)
	}
	return nil
}

// NameToGUID is NameToGuid (hresult.NameToGUID).
func (f *Filter) NameToGUID(ctx context.Context, a wire.NameArgs) (wire.GuidReply, error) {
	return wire.GuidReply{GUID: hresult.NameToGUID(a.Name)}, nil
}

// notEmulated answers the layer functions the emulator does not have yet, naming them.
func notEmulated(method string) error {
	return hresult.Errorf(computecore.E_NOTIMPL, "%s: not emulated by hcsemu", method)
}
