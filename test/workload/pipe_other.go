//go:build !windows

package main

import (
	"io"
	"net"
)

// openPipe connects to hcsemu's stand-in for a named pipe: the unix socket /pipe/NAME of the
// container's root (C:\pipe\NAME), the name lower-cased (internal/hcsemu pipes_linux.go).
func openPipe(_, name string) (io.ReadWriteCloser, error) {
	return net.Dial("unix", "/pipe/"+name)
}
