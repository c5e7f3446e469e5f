package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Filter is the emulated storage filter: the layers vmcompute.dll's ActivateLayer and
// PrepareLayer attached, each with its volume. On Windows wcifs merges a scratch with its parent
// layers into a volume named \\?\Volume{GUID}\; here the volume is an overlayfs of the parents'
// Files/ folders under the scratch disk's folder, mounted at <root>/volumes/<guid>, and the
// compute systems' Container.Storage.Path resolves to it (resolve).
//
// Like the real filter's, the attachments belong to the service, not to the process that made
// them: they outlive it, and any process may undo them. They do not outlive the daemon: each is
// recorded in <root>/volumes/<guid>.json, and a daemon that starts undoes whatever a dead one
// left (recover), as a reboot detaches every layer on Windows.
type Filter struct {
	dir string // <root>/volumes

	mu     sync.Mutex
	layers map[string]*activeLayer // by layer folder
	// bindings are the bind filter's mappings, by root (bind_linux.go).
	bindings map[string]*bindMapping
	closed   bool
}

// activeLayer is one activated layer; it is also the record written to disk.
type activeLayer struct {
	Path string `json:"path"`
	GUID string `json:"guid"`
	// Disk is the scratch disk (sandbox.vhdx) attached at activation; "" for a folder layer.
	Disk string `json:"disk,omitempty"`
	// DiskFS is the folder of Disk's file system (emuvhdx.Header.FileSystem); "" in records
	// of older daemons: Disk + vhdxFSSuffix.
	DiskFS   string   `json:"diskFS,omitempty"`
	Prepared bool     `json:"prepared,omitempty"`
	Parents  []string `json:"parents,omitempty"`
	// Mounted says the volume is mounted at the mount point.
	Mounted bool `json:"mounted,omitempty"`
	// Links are the dosdevices links that make the volume reachable in Wine prefixes.
	Links []string `json:"links,omitempty"`
}

// diskFS is the folder of the file system of the layer's disk.
func (l *activeLayer) diskFS() string {
	if l.DiskFS != "" {
		return l.DiskFS
	}
	return l.Disk + vhdxFSSuffix
}

// ScratchDisk is the name of a writable layer's disk, as HCS, hcsshim and containerd name it.
const ScratchDisk = "sandbox.vhdx"

func New(ctx context.Context, root string) (*Filter, error) {
	f := &Filter{dir: layout.VolumesDir(root), layers: map[string]*activeLayer{}, bindings: map[string]*bindMapping{}}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", f.dir, err)
	}
	f.recover(ctx)
	return f, nil
}

func (f *Filter) target(l *activeLayer) string { return filepath.Join(f.dir, l.GUID) }
func (f *Filter) record(l *activeLayer) string { return filepath.Join(f.dir, l.GUID+".json") }

// recover undoes what a daemon of the same root left attached when it died: mounts, links,
// records. Errors are logged; a mount that cannot go stays visible in the log, not hidden.
func (f *Filter) recover(ctx context.Context) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		log.G(ctx).WithError(err).Warn("hcsemu: reading the storage filter's records")
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		var l activeLayer
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err == nil {
			err = json.Unmarshal(b, &l)
		}
		if err != nil || l.GUID+".json" != name {
			log.G(ctx).WithError(err).WithField("record", name).Warn("hcsemu: unreadable storage record removed")
			os.Remove(filepath.Join(f.dir, name))
			continue
		}
		if err := f.detach(&l); err != nil {
			log.G(ctx).WithError(err).WithField("layer", l.Path).Warn("hcsemu: detaching a layer a previous daemon left")
			continue
		}
		log.G(ctx).WithFields(log.Fields{"layer": l.Path, "volume": l.GUID}).Info("hcsemu: detached a layer a previous daemon left")
	}
}

// detach undoes everything of l: its links, its mount, its mount point and its record.
func (f *Filter) detach(l *activeLayer) error {
	f.unlink(l)
	if err := f.unmount(l); err != nil {
		return err
	}
	os.Remove(f.target(l))
	if err := os.Remove(f.record(l)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (f *Filter) save(l *activeLayer) error {
	b, _ := json.Marshal(l)
	if err := atomicfile.WriteFile(f.record(l), b, 0o600); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "recording layer %q: %v", l.Path, err)
	}
	return nil
}

// layerFolder checks a layer argument: an absolute path (the client translated the caller's
// Windows path) to an existing folder.
func layerFolder(field, p string) (string, error) {
	if p == "" {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "%s: no layer path", field)
	}
	if !filepath.IsAbs(p) {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is not an absolute path", field, p)
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	if err != nil {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: layer folder %q: %v", field, p, err)
	}
	if !fi.IsDir() {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: %q is not a folder", field, p)
	}
	// One name per folder, whatever way the caller reached it: Wine maps C:\ to
	// <prefix>/dosdevices/c:/, a link whose name overlayfs options cannot even hold.
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: layer folder %q: %v", field, p, err)
	}
	return real, nil
}

func (f *Filter) lookupLocked(path string) (*activeLayer, error) {
	if f.closed {
		return nil, hresult.Errorf(computecore.HCS_E_SERVICE_NOT_AVAILABLE, "the HCS emulator is shutting down")
	}
	l, ok := f.layers[path]
	if !ok {
		// Assumption: vmcompute does not document the error for a layer that is not
		// activated; ERROR_NOT_FOUND is the closest documented one.
		return nil, hresult.Errorf(hresult.ErrNotFound, "layer %q is not activated", path)
	}
	return l, nil
}

// Activate is ActivateLayer: a folder that holds a scratch disk has the disk attached and its
// volume mounted; any other folder is made usable as a layer (its mount path is the folder).
// Assumption: activating an activated layer fails with ERROR_INVALID_STATE (vmcompute does not
// document it; hcsshim and containerd activate a layer once per mount).
func (f *Filter) Activate(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	// A layer just imported over parents is settled before it is used (layerimport_linux.go).
	if err := settlePlaceholders(p); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return hresult.Errorf(computecore.HCS_E_SERVICE_NOT_AVAILABLE, "the HCS emulator is shutting down")
	}
	if _, ok := f.layers[p]; ok {
		return hresult.Errorf(hresult.ErrInvalidState, "layer %q is already activated", p)
	}
	l := &activeLayer{Path: p, GUID: hresult.NewGUID()}
	disk := filepath.Join(p, ScratchDisk)
	if _, err := os.Stat(disk); err == nil {
		fs, err := VHDXFileSystem(disk)
		if err != nil {
			return err
		}
		l.Disk, l.DiskFS = disk, fs
		for _, d := range []string{"Files", "work"} {
			if err := os.MkdirAll(filepath.Join(fs, d), 0o755); err != nil {
				return hresult.Errorf(computecore.E_FAIL, "attaching %q: %v", disk, err)
			}
		}
	}
	// The record first: a daemon that dies during the mount finds it and undoes the mount.
	if err := f.save(l); err != nil {
		return err
	}
	if err := f.mount(l); err != nil {
		_ = f.detach(l)
		return err
	}
	if err := f.save(l); err != nil {
		_ = f.detach(l)
		return err
	}
	f.layers[p] = l
	log.G(ctx).WithFields(log.Fields{"layer": p, "disk": l.Disk != ""}).Info("hcsemu: layer activated")
	return nil
}

// Prepare is PrepareLayer: the filter merges the activated layer with its parents (nearest
// first) into one volume, the layer's disk (or, without one, its own Files/ if it has one) on
// top and writable only when it is a disk.
func (f *Filter) Prepare(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	if err := CheckDosDevices(a.DosDevices); err != nil {
		return err
	}
	parents := make([]string, len(a.Parents))
	for i, pp := range a.Parents {
		field := fmt.Sprintf("Parents[%d]", i)
		if parents[i], err = layerFolder(field, pp); err != nil {
			return err
		}
		if err := settlePlaceholders(parents[i]); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "%s: %v", field, err)
		}
		if fi, err := os.Stat(filepath.Join(parents[i], "Files")); err != nil || !fi.IsDir() {
			return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: layer %q has no Files folder", field, parents[i])
		}
		if strings.ContainsAny(parents[i], ":,") {
			// Assumption-free limit of this emulator: overlayfs options cannot hold these.
			return hresult.Errorf(computecore.E_INVALIDARG, "%s: %q has a ':' or ',', which the emulator's overlayfs cannot mount", field, parents[i])
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.lookupLocked(p)
	if err != nil {
		return err
	}
	if l.Prepared {
		return hresult.Errorf(hresult.ErrInvalidState, "layer %q is already prepared", p)
	}
	if err := f.unmount(l); err != nil {
		return err
	}
	l.Prepared, l.Parents = true, parents
	if err := f.mount(l); err != nil {
		l.Prepared, l.Parents = false, nil
		if merr := f.mount(l); merr != nil {
			log.G(ctx).WithError(merr).WithField("layer", p).Warn("hcsemu: remounting after a failed PrepareLayer")
		}
		_ = f.save(l)
		return err
	}
	err = f.save(l)
	if err == nil && a.DosDevices != "" {
		err = f.link(l, a.DosDevices)
	}
	if err != nil {
		// Nothing half done: back to activated only.
		f.unlink(l)
		if uerr := f.unmount(l); uerr == nil {
			l.Prepared, l.Parents = false, nil
			_ = f.mount(l)
		}
		_ = f.save(l)
		return err
	}
	log.G(ctx).WithFields(log.Fields{"layer": p, "parents": len(parents), "volume": l.GUID}).Info("hcsemu: layer prepared")
	return nil
}

// Unprepare is UnprepareLayer: the merge goes, the layer stays activated.
func (f *Filter) Unprepare(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.lookupLocked(p)
	if err != nil {
		return err
	}
	if !l.Prepared {
		return hresult.Errorf(hresult.ErrInvalidState, "layer %q is not prepared", p)
	}
	f.unlink(l)
	if err := f.unmount(l); err != nil {
		_ = f.save(l)
		return err
	}
	l.Prepared, l.Parents = false, nil
	if err := f.mount(l); err != nil {
		_ = f.save(l)
		return err
	}
	log.G(ctx).WithField("layer", p).Info("hcsemu: layer unprepared")
	return f.save(l)
}

// Deactivate is DeactivateLayer. Assumption: a layer still prepared cannot be deactivated
// (ERROR_INVALID_STATE); hcsshim and containerd always unprepare first.
func (f *Filter) Deactivate(ctx context.Context, a wire.LayerArgs) error {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.lookupLocked(p)
	if err != nil {
		return err
	}
	if l.Prepared {
		return hresult.Errorf(hresult.ErrInvalidState, "layer %q is still prepared: unprepare it first", p)
	}
	if err := f.detach(l); err != nil {
		return hresult.Errorf(hresult.ErrBusy, "deactivating layer %q: %v", p, err)
	}
	delete(f.layers, p)
	log.G(ctx).WithField("layer", p).Info("hcsemu: layer deactivated")
	return nil
}

// MountPath is GetLayerMountPath. With a.DosDevices the volume is also linked into that Wine
// prefix (a process other than the one that prepared it may ask).
func (f *Filter) MountPath(ctx context.Context, a wire.LayerArgs) (wire.LayerMountReply, error) {
	p, err := layerFolder("Path", a.Path)
	if err != nil {
		return wire.LayerMountReply{}, err
	}
	if err := CheckDosDevices(a.DosDevices); err != nil {
		return wire.LayerMountReply{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.lookupLocked(p)
	if err != nil {
		return wire.LayerMountReply{}, err
	}
	if !l.Mounted {
		return wire.LayerMountReply{Path: l.Path}, nil
	}
	if a.DosDevices != "" {
		if err := f.link(l, a.DosDevices); err != nil {
			return wire.LayerMountReply{}, err
		}
	}
	return wire.LayerMountReply{Path: volumePath(l.GUID), Volume: true}, nil
}

// resolve returns the mount point of the volume a volume GUID path names, or ok false for a
// path that is not a volume path.
func (f *Filter) Resolve(p string) (target string, ok bool, err error) {
	guid, ok := VolumeGUID(p)
	if !ok {
		return "", false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.layers {
		if l.GUID == guid && l.Mounted {
			return f.target(l), true, nil
		}
	}
	return "", true, fmt.Errorf("no mounted layer has the volume %s", p)
}

// mount mounts l's volume as its state says, if it has one: a disk alone is bound; a layer
// prepared over parents is an overlayfs of its top (the disk's Files/ writable, else the
// folder's own Files/ read-only) and its parents; a folder layer without parents has no volume.
func (f *Filter) mount(l *activeLayer) error {
	var (
		lower []string
		upper string
	)
	if l.Disk != "" {
		upper = filepath.Join(l.diskFS(), "Files")
	} else if len(l.Parents) == 0 {
		// A folder layer on its own (a base layer) is not merged: its mount path is the
		// folder, whose files callers find under Files (containerd's core/mount appends it).
		return nil
	} else if fi, err := os.Stat(filepath.Join(l.Path, "Files")); err == nil && fi.IsDir() {
		lower = append(lower, filepath.Join(l.Path, "Files"))
	}
	if l.Prepared {
		for _, p := range l.Parents {
			lower = append(lower, filepath.Join(p, "Files"))
		}
	}
	target := f.target(l)
	var err error
	switch {
	case upper == "" && len(lower) == 0:
		return nil // a folder layer: its mount path is the folder
	case upper != "" && len(lower) == 0:
		err = BindMount(upper, target, false)
	case upper == "" && len(lower) == 1:
		err = BindMount(lower[0], target, true)
	default:
		opts := []string{"lowerdir=" + strings.Join(lower, ":"), "index=off", "redirect_dir=off", "metacopy=off"}
		if upper != "" {
			opts = append(opts, "upperdir="+upper, "workdir="+filepath.Join(l.diskFS(), "work"))
		}
		if err = os.MkdirAll(target, 0o755); err == nil {
			if err = unix.Mount("overlay", target, "overlay", 0, strings.Join(opts, ",")); err != nil {
				err = fmt.Errorf("mount overlay at %s: %w", target, err)
			}
		}
	}
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "mounting the volume of layer %q: %v", l.Path, err)
	}
	l.Mounted = true
	return nil
}

func BindMount(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// unmount unmounts l's volume, waiting up to a second for its users to leave; a volume still in
// use then is ERROR_BUSY, as Windows refuses to dismount a volume with open files.
func (f *Filter) unmount(l *activeLayer) error {
	if !l.Mounted {
		return nil
	}
	target := f.target(l)
	for i := 0; ; i++ {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			l.Mounted = false
			return nil
		case errors.Is(err, unix.EBUSY) && i < 10:
			time.Sleep(100 * time.Millisecond)
		default:
			return hresult.Errorf(hresult.ErrBusy, "unmounting the volume of layer %q: %v", l.Path, err)
		}
	}
}

// link makes l's volume reachable as \\?\Volume{GUID}\ in the Wine prefix whose dosdevices
// folder is dir: Wine resolves a \\?\ device name through <prefix>/dosdevices/<name in lower
// case> (observed with Wine 8: a symbolic link volume{guid} there to a folder serves
// \\?\Volume{GUID}\ paths).
func (f *Filter) link(l *activeLayer, dir string) error {
	link := filepath.Join(filepath.Clean(dir), "volume{"+l.GUID+"}")
	for _, have := range l.Links {
		if have == link {
			return nil
		}
	}
	os.Remove(link)
	if err := os.Symlink(f.target(l), link); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "DosDevices: linking volume %s: %v", l.GUID, err)
	}
	l.Links = append(l.Links, link)
	return f.save(l)
}

func (f *Filter) unlink(l *activeLayer) {
	for _, link := range l.Links {
		// Only a link to this volume's mount point is removed: the folder is the caller's.
		if dst, err := os.Readlink(link); err == nil && dst == f.target(l) {
			os.Remove(link)
		}
	}
	l.Links = nil
}

// close detaches every layer: the daemon is going, and so is everything it attached.
func (f *Filter) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var errs []error
	if err := f.closeBindings(); err != nil {
		errs = append(errs, err)
	}
	for p, l := range f.layers {
		if err := f.detach(l); err != nil {
			errs = append(errs, fmt.Errorf("detaching layer %s: %w", p, err))
			continue
		}
		delete(f.layers, p)
	}
	return errors.Join(errs...)
}

// active reports whether the folder p is an activated layer or the disk folder of one.
func (f *Filter) active(p string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.layers[p]
	return ok
}
