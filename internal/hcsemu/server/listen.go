package server

import (
	"fmt"
	"net"
	"strconv"

	"github.com/containerd/errdefs"
)

// Addresses are where the daemon serves (cmd/hcsemu's flags).
type Addresses struct {
	// Unix is the unix socket (--address), the transport of the computecore client.
	Unix string
	// TCP, if set, is a loopback host:port served as well (--tcp-address), for clients that
	// cannot receive descriptors (see package wire); port 0 picks a free port.
	TCP string
	// TCPFile, if set, is a file the TCP address actually served is written to once the
	// daemon is ready (--tcp-address-file), so that a caller of port 0 learns the port.
	TCPFile string
	// TCPKeyFile, required with TCP, is where the daemon writes the key every TCP connection
	// must present (--tcp-key-file): a fresh random one per start, readable by the daemon's
	// user only, removed at exit.
	TCPKeyFile string
}

// ValidateTCPAddress checks a --tcp-address: a literal loopback IP and a port (0 for any).
// Every TCP connection must present the daemon's key (gate_linux.go), but the key travels in
// clear, so it is never served where another machine could reach it or listen to it.
func ValidateTCPAddress(address string) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("--tcp-address %q: want 127.0.0.1:PORT or [::1]:PORT: %v: %w", address, err, errdefs.ErrInvalidArgument)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--tcp-address %q: port %q is not a number from 0 to 65535: %w", address, port, errdefs.ErrInvalidArgument)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--tcp-address %q: %q is not a loopback IP address (the key travels in clear, so it is served on 127.0.0.1:PORT or [::1]:PORT only): %w",
			address, host, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Validate checks the addresses before anything listens.
func (a Addresses) Validate() error {
	if a.Unix == "" {
		return fmt.Errorf("--address: a unix socket path is required: %w", errdefs.ErrInvalidArgument)
	}
	if a.TCP != "" {
		if err := ValidateTCPAddress(a.TCP); err != nil {
			return err
		}
		if a.TCPKeyFile == "" {
			return fmt.Errorf("--tcp-address %q without --tcp-key-file: every TCP connection must present the daemon's key, which that file gives its clients: %w", a.TCP, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	if a.TCPFile != "" {
		return fmt.Errorf("--tcp-address-file %q without --tcp-address: there is no TCP address to write: %w", a.TCPFile, errdefs.ErrInvalidArgument)
	}
	if a.TCPKeyFile != "" {
		return fmt.Errorf("--tcp-key-file %q without --tcp-address: there is no TCP transport to authenticate: %w", a.TCPKeyFile, errdefs.ErrInvalidArgument)
	}
	return nil
}
