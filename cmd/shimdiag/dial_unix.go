//go:build !windows

package main

import (
	"context"
	"net"
	"strings"
)

// dialShim connects to a shim's unix socket: address is unix://<path> as containerd's shim
// package writes it (pkg/shim CreateSocketAddress), or the bare path. A path starting with "@"
// is an abstract socket, which net.Dial understands as such on Linux.
func dialShim(ctx context.Context, address string) (net.Conn, error) {
	path := strings.TrimPrefix(address, "unix://")
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
