package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	defaultAddress    = "/run/containerd-wcow-snapshotter/wcow.sock"
	defaultRoot       = "/var/lib/containerd-wcow-snapshotter"
	defaultContainerd = "/run/containerd/containerd.sock"
)

// listen listens on a unix socket, replacing a stale one left by a process that died. The
// socket is 0600, in a folder that, when it makes it, is owner-only: the socket is made with
// the mode the umask leaves, and its folder keeps others away until the chmod.
func listen(address string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(address), 0o700); err != nil {
		return nil, fmt.Errorf("creating folder of socket %s: %w", address, err)
	}
	if c, err := net.Dial("unix", address); err == nil {
		c.Close()
		return nil, fmt.Errorf("another process serves %s", address)
	}
	if err := os.Remove(address); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", address, err)
	}
	l, err := net.Listen("unix", address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", address, err)
	}
	if err := os.Chmod(address, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func dialContainerd(address string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
