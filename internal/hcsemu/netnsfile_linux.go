package hcsemu

import "github.com/openhcs/runhcs/internal/hcsemu/hns"

// The network-namespace helpers of the emulated host (internal/hcsemu/hns's dataplane), for the
// programs beside the daemon (test/winnode, test/cluster's control-plane network, `hcsemu
// hostns`), so there is one way to make, enter and remove them. Each is hns's function of the
// same name.

// HostNetnsPath is the file of the emulated host's network namespace of the daemon using root.
func HostNetnsPath(root string) string { return hns.HostNetnsPath(root) }

// NewNetnsFile makes a new network namespace and bind-mounts it at path, which must not exist.
func NewNetnsFile(path string) error { return hns.NewNetnsFile(path) }

// RemoveNetnsFile unmounts and removes a namespace file made by NewNetnsFile.
func RemoveNetnsFile(path string) error { return hns.RemoveNetnsFile(path) }

// InNetns runs fn on a thread inside the network namespace bound at path.
func InNetns(path string, fn func() error) error { return hns.InNetns(path, fn) }

// InHostNetns runs fn on a thread in the emulated host's network namespace of root's daemon.
func InHostNetns(root string, fn func() error) error { return hns.InHostNetns(root, fn) }

// ExecInNetns replaces the calling program with argv run in the network namespace at path.
func ExecInNetns(path string, argv []string) error { return hns.ExecInNetns(path, argv) }

// ExecInHostNetns replaces the calling program with argv run in root's emulated host's network
// namespace (`hcsemu hostns`). It returns only on failure.
func ExecInHostNetns(root string, argv []string) error { return hns.ExecInHostNetns(root, argv) }
