package main

import (
	"context"
	"fmt"
	"net"

	"github.com/Microsoft/go-winio"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	defaultAddress    = `\\.\pipe\containerd-wcow-snapshotter`
	defaultRoot       = `C:\ProgramData\containerd-wcow-snapshotter`
	defaultContainerd = `\\.\pipe\containerd-containerd`
)

// listen listens on a named pipe that only Administrators and SYSTEM may open, as
// containerd's own pipe.
func listen(address string) (net.Listener, error) {
	l, err := winio.ListenPipe(address, &winio.PipeConfig{SecurityDescriptor: "D:P(A;;GA;;;BA)(A;;GA;;;SY)"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", address, err)
	}
	return l, nil
}

func dialContainerd(address string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return winio.DialPipeContext(ctx, addr)
		}))
}
