package wclayer

import (
	"context"
	"io"
)

// Layers under the emulator: folders and overlayfs, with nothing to choose.
type Layers struct{}

// New returns the host's Layers.
func New() *Layers { return &Layers{} }

func (*Layers) importLayer(ctx context.Context, r io.Reader, layer string, parents []string, opts ImportOptions) (int64, error) {
	return importFolder(ctx, r, layer, parents, opts)
}

func (*Layers) exportLayer(ctx context.Context, w io.Writer, layer string) error {
	return exportFolder(ctx, w, layer)
}
