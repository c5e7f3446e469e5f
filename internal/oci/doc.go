// Package oci translates an OCI runtime spec, its annotations and the runtime options
// into HCS documents (internal/hcs/schema2), and chooses the isolation of a task.
// It is pure translation: it performs no HCS call and no I/O.
package oci
