// Package oci translates an OCI runtime spec, its annotations and the runtime options
// into HCS documents (internal/hcs/schema2), and chooses the isolation of a task.
// It is pure translation: it performs no HCS call and no I/O.
//
// Every error names the spec field or annotation at fault and its value, and wraps
// errdefs.ErrInvalidArgument, so containerd reports it as such.
//
// It imports internal/hcs/schema2, protocols/options (the runtime options), internal/winargs
// (command lines) and internal/computenetwork (GUIDs of HNS namespaces and endpoints) and
// nothing else of runhcs. isolation.go applies the runtime options to a spec and chooses the isolation; vm.go
// sizes a Hyper-V task's utility VM from its annotations and the runtime options (VMSizing).
package oci
