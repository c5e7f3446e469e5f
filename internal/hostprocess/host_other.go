//go:build !windows

package hostprocess

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// New returns the host's HostProcess services. Only Windows has them so far: the Linux-native
// mode (a host process in hcsemu's host namespaces with a cgroup as its job) is not written.
func New() (Host, error) {
	return nil, fmt.Errorf("HostProcess containers (annotation microsoft.com/hostprocess-container) need a Windows host; the Linux-native emulation does not run them yet: %w", errdefs.ErrNotImplemented)
}
