// Package shim serves containerd's task API (v2 and v3) and owns pods, tasks and
// execs: their state machines, events and stdio relays. It drives compute systems through
// internal/hcs, mounts layers through internal/layers and translates specs through
// internal/oci. It imports nothing above it (see DESIGN.md).
package shim
