// Package wiretest is what the emulator's tests share to reach a daemon over its TCP transport
// as the stand-in DLLs do: a connection that has presented the daemon's key, and a process's
// stdio stream attached by its token. It imports only the protocol (internal/hcsemu/wire); the
// tests of internal/hcsemu/server and internal/hcsemu/compute use it.
package wiretest

import (
	"net"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Dial opens a TCP connection to addr and presents key, as every client must before anything
// else; the connection is closed at the end of the test.
func Dial(t testing.TB, addr, key string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := wire.Authenticate(c, key); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// AttachStdio opens a stream connection: after the key, its first frame is
// AttachStdio{token, slot}.
func AttachStdio(t testing.TB, addr, key, token string, slot int) *net.TCPConn {
	t.Helper()
	c := Dial(t, addr, key)
	f, err := wire.NewRequest(1, wire.MethodAttachStdio, wire.AttachStdioArgs{Token: token, Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteFrame(c, f); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}
