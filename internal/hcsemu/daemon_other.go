//go:build !linux

package hcsemu

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
)

// Config configures the daemon; see the Linux implementation.
type Config struct {
	Root          string
	OSVersion     string
	ShutdownGrace time.Duration
	CgroupRoot    string
}

// DefaultOSVersion is Windows Server 2022's build, the default --os-version.
const DefaultOSVersion = "10.0.20348.1"

// Run fails: the emulator needs Linux (chroot, cgroup v1, overlayfs). On Windows the real HCS
// is there to use.
func Run(ctx context.Context, cfg Config, addrs Addresses) error {
	return fmt.Errorf("the HCS emulator runs on Linux only: %w", errdefs.ErrNotImplemented)
}

// ExecInHostNetns fails: there is no emulated host outside Linux.
func ExecInHostNetns(root string, argv []string) error {
	return fmt.Errorf("the HCS emulator runs on Linux only: %w", errdefs.ErrNotImplemented)
}
