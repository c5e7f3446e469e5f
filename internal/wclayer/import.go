package wclayer

import (
	"fmt"
	"sync"

	"github.com/containerd/errdefs"
)

// ImportOptions tune ImportLayer.
type ImportOptions struct {
	// Sync flushes the file system before the layer is renamed into place, so that the
	// layer survives a power loss once ImportLayer has returned.
	Sync bool
}

// swapLocks serialises replacing one layer folder (the emulator's rename into place, Windows'
// move aside and back).
var swapLocks sync.Map // layer path -> *sync.Mutex

// invalid is an errdefs.ErrInvalidArgument error: what a tar or a request got wrong.
func invalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}
