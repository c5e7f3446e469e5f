// Package layout names where an hcsemu daemon keeps what it makes on the machine beside its
// records: its cgroup folders (/sys/fs/cgroup/<controller>/hcsemu/<instance>), its network
// namespaces (<root>/netns: the emulated host's, one per HNS namespace, one per utility VM), its
// utility VMs' folder (<root>/vms) and how its VM init processes are known.
//
// The daemon's packages (under internal/hcsemu) name these objects through this
// package, and the end-to-end harness (test/harness) asks it where to look for what a test left
// behind, so that a rename in the emulator moves its leak checks with it.
// internal/hcsemu/compute's TestLayoutAgreesWithTheEngine checks that a running engine keeps its
// objects where this package says.
//
// It imports the standard library only, so a test helper can use it without the emulator.
package layout
