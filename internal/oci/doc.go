// Package oci translates an OCI runtime spec, its annotations and the runtime options
// into HCS documents (internal/hcs/schema2), and chooses the isolation of a task.
// It is pure translation: it performs no HCS call and no I/O.
//
// Every error names the spec field or annotation at fault and its value, and wraps
// errdefs.ErrInvalidArgument, so containerd reports it as such.
//
// It imports internal/hcs/schema2 and nothing else of runhcs.
package oci
