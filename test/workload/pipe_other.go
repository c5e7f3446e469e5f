//go:build !windows

package main

import (
	"io"
	"net"
	"path/filepath"
)

// pipeRoot is where hcsemu puts its stand-ins for named pipes: /pipe of the container's root
// (C:\pipe; internal/hcsemu/compute pipes_linux.go). A variable for tests.
var pipeRoot = "/pipe"

// openPipe connects to hcsemu's stand-in for a named pipe: the unix socket pipeRoot/NAME, the
// name lower-cased.
func openPipe(_, name string) (io.ReadWriteCloser, error) {
	return net.Dial("unix", filepath.Join(pipeRoot, name))
}
