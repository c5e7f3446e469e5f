package layers

import (
	"context"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// wclayerFilter is internal/wclayer's storage-filter API.
type wclayerFilter struct{}

func (wclayerFilter) Mount(ctx context.Context, scratch string, parents []string) (string, error) {
	return wclayer.Mount(ctx, scratch, parents)
}

func (wclayerFilter) Unmount(ctx context.Context, scratch string) error {
	return wclayer.Unmount(ctx, scratch)
}
