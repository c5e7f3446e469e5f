//go:build !windows

package shim

import "io"

// openTaskLog is nil off Windows: containerd opens a task's shim log as a FIFO in its bundle
// without waiting for a writer.
var openTaskLog func(namespace, id string) (io.Closer, error)
