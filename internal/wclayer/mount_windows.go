package wclayer

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
)

// On Windows the storage filter is wcifs, driven through hcsshim's wclayer/computestorage
// packages (ActivateLayer, PrepareLayer, GetLayerMountPath). runhcs does not carry those
// bindings yet, so Mount and Unmount say so instead of doing half of it.
func mount(ctx context.Context, scratch string, parents []string) (string, error) {
	return "", fmt.Errorf("mounting layer %s on Windows (wcifs through hcsshim's computestorage API): %w", scratch, errdefs.ErrNotImplemented)
}

func unmount(ctx context.Context, scratch string) error {
	return fmt.Errorf("unmounting layer %s on Windows (wcifs through hcsshim's computestorage API): %w", scratch, errdefs.ErrNotImplemented)
}

func isMounted(scratch string) (bool, error) { return false, nil }
