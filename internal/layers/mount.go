package layers

import (
	"context"
	"fmt"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// Filter is the storage-filter API of internal/wclayer (Mount/Unmount), which *wclayer.Layers
// implements. Tests substitute a fake.
type Filter interface {
	Mount(ctx context.Context, scratch string, parents []string) (volumePath string, err error)
	Unmount(ctx context.Context, scratch string) error
}

// Mounter mounts chains through a Filter.
type Mounter struct {
	Filter Filter
}

// NewMounter returns a Mounter over internal/wclayer's storage filter. There is no
// package-level Mounter: the shim makes one and passes it down; tests make theirs with a fake
// Filter.
func NewMounter() *Mounter { return &Mounter{Filter: wclayer.New()} }

// Mount attaches the storage filter over c and returns the volume path the container document
// names as Container.Storage.Path.
func (m *Mounter) Mount(ctx context.Context, c *Chain) (string, error) {
	if c == nil {
		return "", fmt.Errorf("mount layers: no layer chain")
	}
	vol, err := m.Filter.Mount(ctx, c.Scratch, c.Parents)
	if err != nil {
		return "", fmt.Errorf("mount layers of scratch %q over %d parent(s): %w", c.Scratch, len(c.Parents), err)
	}
	log.G(ctx).WithFields(log.Fields{"scratch": c.Scratch, "volume": vol}).Debug("layers mounted")
	return vol, nil
}

// Unmount detaches the storage filter from scratch; not being mounted is not an error.
func (m *Mounter) Unmount(ctx context.Context, scratch string) error {
	if err := m.Filter.Unmount(ctx, scratch); err != nil {
		return fmt.Errorf("unmount layers of scratch %q: %w", scratch, err)
	}
	return nil
}
