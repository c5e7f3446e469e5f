package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The unix socket transport, where a process's stdio travels as descriptors (SCM_RIGHTS). The
// loopback TCP transport is in tcp_linux.go; both serve the same requests (server_linux.go).

// Listen creates the socket at address: its folder is created, and a socket file nobody
// answers on (left by a daemon that died) is removed. A socket somebody answers on is an
// error, so two daemons never share an address.
func Listen(address string) (*net.UnixListener, error) {
	// A folder of its own is owner-only: the socket is reachable by nobody else even before
	// its chmod below (it is made with the mode the umask leaves).
	if err := os.MkdirAll(filepath.Dir(address), 0o700); err != nil {
		return nil, fmt.Errorf("create the folder of %s: %w", address, err)
	}
	if _, err := os.Lstat(address); err == nil {
		c, err := net.DialTimeout("unix", address, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("another HCS emulator is already listening at %s", address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", address, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: address, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen at %s: %w", address, err)
	}
	// Only root talks to HCS, as only administrators may call vmcompute.
	if err := os.Chmod(address, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts unix connections until ln is closed, then closes them all and returns. Only
// the daemon's own uid is served (gate_linux.go).
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	return s.serve(ctx, func() (net.Conn, error) { return ln.AcceptUnix() }, "", func(ctx context.Context, _ *group, nc net.Conn) {
		s.runConn(ctx, &unixTransport{wc: wire.NewConn(nc.(*net.UnixConn))}, nil)
	})
}

// unixTransport is a connection on the unix socket: files travel as SCM_RIGHTS.
type unixTransport struct {
	wc *wire.Conn
}

func (t *unixTransport) receive() (*wire.Frame, error) {
	f, fds, err := t.wc.Receive()
	for _, fd := range fds {
		syscall.Close(fd) // clients send none
	}
	return f, err
}

func (t *unixTransport) send(f *wire.Frame, files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return t.wc.Send(f, fds...)
}

func (t *unixTransport) close() error { return t.wc.Close() }
