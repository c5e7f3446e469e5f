package hcsemu

// The namespace-file helpers the emulator uses for its own namespaces, for programs that make
// network namespaces of their own beside it (test/cluster's control-plane network), so there is
// one way to make, enter and remove them.

// NewNetnsFile makes a new network namespace and bind-mounts it at path, which must not exist
// (as `ip netns add` does; usable with `nsenter --net=PATH`). Its loopback is down.
func NewNetnsFile(path string) error { return newNetnsFile(path) }

// RemoveNetnsFile unmounts and removes a namespace file made by NewNetnsFile; a missing one is
// not an error. The namespace goes when its last process or descriptor does.
func RemoveNetnsFile(path string) error { return removeNetnsFile(path) }

// InNetns runs fn on a thread inside the network namespace bound at path: sockets fn makes stay
// in that namespace.
func InNetns(path string, fn func() error) error { return inNetns(path, fn) }
