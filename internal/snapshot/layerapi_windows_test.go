package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// testLayers is what the package's tests run over on Windows (and under Wine, make
// test-windows): folderAPI instead of vmcompute.dll and the backup APIs, which Wine lacks and
// which need an elevated Windows host. The tests check the snapshotter's own logic, not
// Microsoft's.
var testLayers = wclayer.NewWithAPI(&folderAPI{active: map[string]bool{}})

// folderAPI is a wclayer.LayerAPI over plain folders: scratch disks are small files, a layer is
// activated (and then has a mount path, its own folder, as vmcompute answers for a folder
// layer) from ActivateLayer to DeactivateLayer, conversions do nothing, an import writes the
// tar's directories and regular files into the layer folder (so a test sees what reached the
// importer) and an export writes an empty layer.
type folderAPI struct {
	mu     sync.Mutex
	active map[string]bool
}

func (*folderAPI) EnablePrivileges([]string) error                     { return nil }
func (*folderAPI) RunWithPrivileges(_ []string, fn func() error) error { return fn() }
func (*folderAPI) PrepareLayer(string, []string) error                 { return nil }
func (*folderAPI) UnprepareLayer(string) error                         { return nil }
func (*folderAPI) ExpandScratchSize(string, uint64) error              { return nil }
func (*folderAPI) ConvertToBaseLayer(string) error                     { return nil }
func (*folderAPI) DestroyLayer(l string) error                         { return os.RemoveAll(l) }

func (f *folderAPI) ActivateLayer(l string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active[l] = true
	return nil
}

func (f *folderAPI) DeactivateLayer(l string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active[l] {
		return windows.ERROR_NOT_FOUND
	}
	delete(f.active, l)
	return nil
}

func (f *folderAPI) GetLayerMountPath(l string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active[l] {
		return "", windows.ERROR_NOT_FOUND
	}
	return l, nil
}

func (*folderAPI) CreateScratchLayer(l string, _ []string) error {
	return os.WriteFile(filepath.Join(l, wclayer.ScratchVHDX), []byte("scratch"), 0o600)
}

func (*folderAPI) ImportLayerFromTar(_ context.Context, r io.Reader, l string, _ []string) (int64, error) {
	if err := os.MkdirAll(wclayer.FilesPath(l), 0o755); err != nil {
		return 0, err
	}
	tr := tar.NewReader(r)
	var n int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		p := filepath.Join(l, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
			}
			n += int64(len(b))
		}
		if err != nil {
			return n, err
		}
	}
}

func (*folderAPI) ExportLayerToTar(_ context.Context, w io.Writer, _ string, _ []string) error {
	return tar.NewWriter(w).Close()
}
