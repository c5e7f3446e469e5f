package server

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// stubEngine serves GetServiceProperties only, with an empty document: what the gate's tests
// need behind the gate to tell a served connection from a refused one. The engine's own
// behaviour behind the server is tested in internal/hcsemu/compute, through this server.
type stubEngine struct{}

func (stubEngine) Method(name string) (dispatch.Method, bool) {
	if name != wire.MethodGetServiceProperties {
		return nil, false
	}
	return dispatch.WithArgs(func(context.Context, dispatch.Subscriber, wire.QueryArgs) (dispatch.Answer, error) {
		return dispatch.Answer{Result: "{}"}, nil
	}), true
}

func (stubEngine) BeforeRequest(context.Context, string) error { return nil }

func (stubEngine) Track(dispatch.Subscriber, func()) func() { return func() {} }

func (stubEngine) Forget(context.Context, dispatch.Subscriber) {}

func (stubEngine) ClientPaths(wire.ClientPathsArgs) (func(context.Context) context.Context, error) {
	return nil, errors.New("the stub engine takes no drive mapping")
}

// testServer is a server of the stub engine on a unix socket and on loopback TCP, as
// `hcsemu --tcp-address 127.0.0.1:0` serves.
type testServer struct {
	addr    string // the unix socket
	tcpAddr string // the loopback TCP address the same server serves
}

// startServer serves the stub engine until the end of the test.
func startServer(t *testing.T) *testServer {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "hcsemu.sock")
	ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := NewServer(stubEngine{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	go func() { done <- srv.ServeTCP(ctx, tln, testKey) }()
	t.Cleanup(func() {
		ln.Close()
		tln.Close()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
		srv.Close()
		cancel()
	})
	return &testServer{addr: addr, tcpAddr: tln.Addr().String()}
}
