package snapshot

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// TestMain runs the package's tests on Windows (and under Wine, make test-windows) over
// folderAPI instead of vmcompute.dll and the backup APIs, which Wine lacks and which need an
// elevated Windows host: the tests check the snapshotter's own logic, not Microsoft's.
func TestMain(m *testing.M) {
	restore := wclayer.SetLayerAPI(folderAPI{})
	code := m.Run()
	restore()
	os.Exit(code)
}

// folderAPI is a wclayer.LayerAPI over plain folders: scratch disks are small files, layers
// are never activated, conversions do nothing, and the tar calls read and write empty layers.
type folderAPI struct{}

func (folderAPI) EnablePrivileges([]string) error                     { return nil }
func (folderAPI) RunWithPrivileges(_ []string, fn func() error) error { return fn() }
func (folderAPI) ActivateLayer(string) error                          { return nil }
func (folderAPI) DeactivateLayer(string) error                        { return nil }
func (folderAPI) PrepareLayer(string, []string) error                 { return nil }
func (folderAPI) UnprepareLayer(string) error                         { return nil }
func (folderAPI) GetLayerMountPath(string) (string, error)            { return "", windows.ERROR_NOT_FOUND }
func (folderAPI) ExpandScratchSize(string, uint64) error              { return nil }
func (folderAPI) ConvertToBaseLayer(string) error                     { return nil }
func (folderAPI) DestroyLayer(l string) error                         { return os.RemoveAll(l) }

func (folderAPI) CreateScratchLayer(l string, _ []string) error {
	return os.WriteFile(filepath.Join(l, wclayer.ScratchVHDX), []byte("scratch"), 0o600)
}

func (folderAPI) ImportLayerFromTar(_ context.Context, r io.Reader, l string, _ []string) (int64, error) {
	if err := os.MkdirAll(wclayer.FilesPath(l), 0o755); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, r)
	return n, err
}

func (folderAPI) ExportLayerToTar(_ context.Context, w io.Writer, _ string, _ []string) error {
	return tar.NewWriter(w).Close()
}
