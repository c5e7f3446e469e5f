package hcsemu

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
}

// ValidateTCPAddress checks a --tcp-address: a literal loopback IP and a port (0 for any).
// The protocol has no authentication (on the unix socket, the file's permissions guard it), so
// it is never served where another machine could reach it.
func ValidateTCPAddress(address string) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("--tcp-address %q: want 127.0.0.1:PORT or [::1]:PORT: %v: %w", address, err, errdefs.ErrInvalidArgument)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--tcp-address %q: port %q is not a number from 0 to 65535: %w", address, port, errdefs.ErrInvalidArgument)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--tcp-address %q: %q is not a loopback IP address (the protocol has no authentication, so it is served on 127.0.0.1:PORT or [::1]:PORT only): %w",
			address, host, errdefs.ErrInvalidArgument)
	}
	return nil
}

// validate checks the addresses before anything listens.
func (a Addresses) validate() error {
	if a.Unix == "" {
		return fmt.Errorf("--address: a unix socket path is required: %w", errdefs.ErrInvalidArgument)
	}
	if a.TCP != "" {
		return ValidateTCPAddress(a.TCP)
	}
	if a.TCPFile != "" {
		return fmt.Errorf("--tcp-address-file %q without --tcp-address: there is no TCP address to write: %w", a.TCPFile, errdefs.ErrInvalidArgument)
	}
	return nil
}
