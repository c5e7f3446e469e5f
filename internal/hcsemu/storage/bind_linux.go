package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// bindMapping is one host-wide bind filter mapping (BfSetupFilter without a job): a bind mount
// of its target at its root in the emulated host's mount namespace.
type bindMapping struct {
	target  string
	created bool // the root folder did not exist and was made for the mapping
}

// BindSetup is BfSetupFilter without a job: Target appears at Root, read-only with ReadOnly.
// As on Windows (go-winio pkg/bindfilter ApplyFileBinding: "The parent directory needs to
// exist"), Root's parent must exist and Root itself need not (the filter presents it as a
// folder, or as a file for a file's mapping; here it is made, and removed with the mapping).
// Target is a folder, a volume or a single file. Assumption: the filter maps a file onto a file
// path, as hcsshim's job containers bind kubelet's c:\dev\termination-log through it
// (internal/jobcontainers mounts.go); Microsoft documents no file rule either way. A second mapping at the same root is
// refused (BINDFLT_FLAG_NO_MULTIPLE_TARGETS, which go-winio always sets). Assumption: the
// HRESULTs for a missing parent (ERROR_PATH_NOT_FOUND) and an existing mapping
// (ERROR_ALREADY_EXISTS) are not documented.
func (f *Filter) BindSetup(_ context.Context, a wire.BindArgs) error {
	if !filepath.IsAbs(a.Root) || filepath.Clean(a.Root) == "/" {
		return hresult.Errorf(computecore.E_INVALIDARG, "root: %q is not an absolute path below /", a.Root)
	}
	root := filepath.Clean(a.Root)
	target, isVolume, err := f.Resolve(a.Target)
	if isVolume && err != nil {
		return hresult.Errorf(computecore.E_FILE_NOT_FOUND, "target: %v", err)
	}
	if !isVolume {
		if !filepath.IsAbs(a.Target) {
			return hresult.Errorf(computecore.E_INVALIDARG, "target: %q is neither a volume path nor an absolute path", a.Target)
		}
		target = filepath.Clean(a.Target)
	}
	tfi, err := os.Stat(target)
	if err != nil || !(tfi.IsDir() || tfi.Mode().IsRegular()) {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "target: %q is neither a folder nor a file", a.Target)
	}
	if fi, err := os.Stat(filepath.Dir(root)); err != nil || !fi.IsDir() {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "root: the parent of %q is not a folder", a.Root)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return hresult.Errorf(computecore.HCS_E_SERVICE_NOT_AVAILABLE, "the storage filter is closed")
	}
	if _, ok := f.bindings[root]; ok {
		return hresult.Errorf(errBindExists, "root: %q already has a mapping", a.Root)
	}
	m := &bindMapping{target: target}
	if err := makeRoot(root, tfi.IsDir()); err == nil {
		m.created = true
	} else if !errors.Is(err, os.ErrExist) {
		return hresult.Errorf(computecore.E_FAIL, "root: %v", err)
	}
	if err := unix.Mount(target, root, "", unix.MS_BIND, ""); err != nil {
		m.removeRoot(root)
		return hresult.Errorf(computecore.E_FAIL, "binding %q at %q: %v", a.Target, a.Root, err)
	}
	if a.ReadOnly {
		if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(root, unix.MNT_DETACH)
			m.removeRoot(root)
			return hresult.Errorf(computecore.E_FAIL, "making the mapping at %q read-only: %v", a.Root, err)
		}
	}
	f.bindings[root] = m
	return nil
}

// BindRemove is BfRemoveMapping without a job: the mapping at Root goes, and so does the root
// folder when it was made for it. A root without a mapping is ERROR_NOT_FOUND (what the
// stand-in answered before mappings existed; assumption, see hack/wine/bindfltapi).
func (f *Filter) BindRemove(_ context.Context, a wire.BindArgs) error {
	root := filepath.Clean(a.Root)
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.bindings[root]
	if !ok {
		return hresult.Errorf(hresult.ErrNotFound, "root: %q has no mapping", a.Root)
	}
	if err := m.unmount(root); err != nil {
		return err
	}
	delete(f.bindings, root)
	return nil
}

// makeRoot makes a missing root: a folder for a folder's mapping, an empty file for a file's.
func makeRoot(root string, dir bool) error {
	if dir {
		return os.Mkdir(root, 0o755)
	}
	f, err := os.OpenFile(root, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func (m *bindMapping) unmount(root string) error {
	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return hresult.Errorf(computecore.E_FAIL, "removing the mapping at %q: %v", root, err)
	}
	m.removeRoot(root)
	return nil
}

func (m *bindMapping) removeRoot(root string) {
	if m.created {
		os.Remove(root)
	}
}

// closeBindings removes every mapping: the daemon is going (the bind filter's mappings do not
// outlive a reboot either). Called with f.mu held.
func (f *Filter) closeBindings() error {
	var errs []error
	for root, m := range f.bindings {
		if err := m.unmount(root); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(f.bindings, root)
	}
	return errors.Join(errs...)
}

// errBindExists is HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS).
const errBindExists computecore.HRESULT = 0x800700B7
