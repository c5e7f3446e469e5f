package main

import (
	"context"
	"net"
	"strings"

	winio "github.com/Microsoft/go-winio"
)

// pipePrefix is where the shim's pipes live (docs/architecture.md, "Wire compatibility": the
// name hcsshim's shims use, \\.\pipe\ProtectedPrefix\Administrators\containerd-shim-<namespace>-<pod>-pipe).
const pipePrefix = `\\.\pipe\ProtectedPrefix\Administrators\`

// dialShim connects to a shim's named pipe, as the shim listens on it (go-winio). A name
// without the \\.\ prefix is taken under pipePrefix, as hcsshim's shimdiag takes it.
func dialShim(ctx context.Context, address string) (net.Conn, error) {
	if !strings.HasPrefix(address, `\\`) {
		address = pipePrefix + address
	}
	return winio.DialPipeContext(ctx, address)
}
