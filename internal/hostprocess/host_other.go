//go:build !windows && !linux

package hostprocess

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// New returns the host's HostProcess services. Windows (host_windows.go) and the Linux-native
// mode (host_linux.go) have them; other systems do not.
func New() (Host, error) {
	return nil, fmt.Errorf("HostProcess containers (annotation microsoft.com/hostprocess-container) need a Windows host or the Linux-native emulation: %w", errdefs.ErrNotImplemented)
}
