package wclayer

import (
	"context"
	"io"
	"path/filepath"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/pkg/ociwclayer"
)

// LayerAPI is every call this package makes into Microsoft's layer APIs on Windows, by layer
// folder path. The default is hcsshim's (its root package's layer functions over vmcompute.dll,
// and pkg/ociwclayer over the backup APIs) with go-winio's privilege calls. Under Wine the
// layer functions reach hcsemu's storage filter through hack/wine's stand-in vmcompute.dll, and
// the tests of the real path run there (storagefilter_windows_test.go,
// childlayer_windows_test.go); the portable tests whose layers hold reparse points, which Wine 8
// cannot, and the narrow tests of this package's own logic make their Layers with NewWithAPI
// and a fake.
type LayerAPI interface {
	// EnablePrivileges enables privileges for the whole process (winio.EnableProcessPrivileges).
	EnablePrivileges(names []string) error
	// RunWithPrivileges runs fn on a thread holding the privileges (winio.RunWithPrivileges).
	RunWithPrivileges(names []string, fn func() error) error

	ActivateLayer(layer string) error
	DeactivateLayer(layer string) error
	PrepareLayer(layer string, parents []string) error
	UnprepareLayer(layer string) error
	GetLayerMountPath(layer string) (string, error)
	CreateScratchLayer(layer string, parents []string) error
	ExpandScratchSize(layer string, size uint64) error
	ConvertToBaseLayer(layer string) error
	DestroyLayer(layer string) error

	ImportLayerFromTar(ctx context.Context, r io.Reader, layer string, parents []string) (int64, error)
	ExportLayerToTar(ctx context.Context, w io.Writer, layer string, parents []string) error
}

// Layers on Windows: every layer call goes through api.
type Layers struct{ api LayerAPI }

// New returns the host's Layers, over hcsshim's layer APIs.
func New() *Layers { return &Layers{api: hcsshimAPI{}} }

// NewWithAPI returns Layers over api instead of hcsshim's (a fake in tests).
func NewWithAPI(api LayerAPI) *Layers { return &Layers{api: api} }

func (l *Layers) importLayer(ctx context.Context, r io.Reader, layer string, parents []string, opts ImportOptions) (int64, error) {
	return l.importWindows(ctx, r, layer, parents, opts)
}

func (l *Layers) exportLayer(ctx context.Context, w io.Writer, layer string) error {
	return l.exportWindows(ctx, w, layer)
}

// hcsshimAPI is LayerAPI through hcsshim. Its root package names a layer by the folder holding
// it and its name (DriverInfo.HomeDir, id) and joins them back into the path (layer.go).
type hcsshimAPI struct{}

func driverInfo(layer string) (hcsshim.DriverInfo, string) {
	return hcsshim.DriverInfo{HomeDir: filepath.Dir(layer)}, filepath.Base(layer)
}

func (hcsshimAPI) EnablePrivileges(names []string) error { return winio.EnableProcessPrivileges(names) }
func (hcsshimAPI) RunWithPrivileges(names []string, fn func() error) error {
	return winio.RunWithPrivileges(names, fn)
}

func (hcsshimAPI) ActivateLayer(layer string) error {
	di, id := driverInfo(layer)
	return hcsshim.ActivateLayer(di, id)
}

func (hcsshimAPI) DeactivateLayer(layer string) error {
	di, id := driverInfo(layer)
	return hcsshim.DeactivateLayer(di, id)
}

func (hcsshimAPI) PrepareLayer(layer string, parents []string) error {
	di, id := driverInfo(layer)
	return hcsshim.PrepareLayer(di, id, parents)
}

func (hcsshimAPI) UnprepareLayer(layer string) error {
	di, id := driverInfo(layer)
	return hcsshim.UnprepareLayer(di, id)
}

func (hcsshimAPI) GetLayerMountPath(layer string) (string, error) {
	di, id := driverInfo(layer)
	return hcsshim.GetLayerMountPath(di, id)
}

func (hcsshimAPI) CreateScratchLayer(layer string, parents []string) error {
	di, id := driverInfo(layer)
	// The parent id argument is unused by hcsshim (kept for API compatibility).
	return hcsshim.CreateScratchLayer(di, id, "", parents)
}

func (hcsshimAPI) ExpandScratchSize(layer string, size uint64) error {
	di, id := driverInfo(layer)
	return hcsshim.ExpandScratchSize(di, id, size)
}

func (hcsshimAPI) ConvertToBaseLayer(layer string) error { return hcsshim.ConvertToBaseLayer(layer) }

func (hcsshimAPI) DestroyLayer(layer string) error {
	di, id := driverInfo(layer)
	return hcsshim.DestroyLayer(di, id)
}

func (hcsshimAPI) ImportLayerFromTar(ctx context.Context, r io.Reader, layer string, parents []string) (int64, error) {
	return ociwclayer.ImportLayerFromTar(ctx, r, layer, parents)
}

func (hcsshimAPI) ExportLayerToTar(ctx context.Context, w io.Writer, layer string, parents []string) error {
	return ociwclayer.ExportLayerToTar(ctx, w, layer, parents)
}
