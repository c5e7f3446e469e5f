package wintest

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
)

var pipeSeq atomic.Int64

func pipeName(t *testing.T) string {
	return fmt.Sprintf(`\\.\pipe\runhcs-wintest-%d-%d`, time.Now().UnixNano(), pipeSeq.Add(1))
}

// roundTrip dials name and accepts on l concurrently (dialFirst: the dial starts first, so that
// it usually runs before Accept has made its instance), then checks that a byte written by the
// client reaches the accepted connection and one written back reaches the client. The bound
// only ends a hang (the failure this test exists for); nothing is timed.
func roundTrip(t *testing.T, l net.Listener, name string, dialFirst bool) {
	t.Helper()
	const bound = 60 * time.Second
	type result struct {
		c   net.Conn
		err error
	}
	dialed, accepted := make(chan result, 1), make(chan result, 1)
	dial := func() {
		timeout := bound
		c, err := winio.DialPipe(name, &timeout)
		dialed <- result{c, err}
	}
	accept := func() {
		c, err := l.Accept()
		accepted <- result{c, err}
	}
	if dialFirst {
		go dial()
		go accept()
	} else {
		go accept()
		go dial()
	}
	var c, s net.Conn
	for c == nil || s == nil {
		select {
		case r := <-dialed:
			if r.err != nil {
				t.Fatalf("DialPipe %s: %v", name, r.err)
			}
			c = r.c
			defer c.Close()
		case r := <-accepted:
			if r.err != nil {
				t.Fatalf("Accept: %v", r.err)
			}
			s = r.c
			defer s.Close()
		case <-time.After(bound):
			t.Fatalf("%s: after %v, client connected: %v, accepted: %v (a client on an instance nobody accepts)", name, bound, c != nil, s != nil)
		}
	}
	_ = c.SetDeadline(time.Now().Add(bound))
	_ = s.SetDeadline(time.Now().Add(bound))
	// Writes in their own goroutines: Wine's pipes made with no buffer size accept a write only
	// once the other end reads.
	echo := func(from, to net.Conn, b byte) {
		werr := make(chan error, 1)
		go func() { _, err := from.Write([]byte{b}); werr <- err }()
		got := make([]byte, 1)
		if _, err := io.ReadFull(to, got); err != nil || got[0] != b {
			t.Fatalf("read %q, %v; want %q", got, err, b)
		}
		if err := <-werr; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	echo(c, s, 'p')
	echo(s, c, 'q')
}

// TestPipeFirstClient: the first client of a go-winio ListenPipe reaches Accept, whether it
// dials before or after Accept is called, with no dummy client. go-winio creates the pipe's
// first instance with SYNCHRONIZE access only and never connects it: on Windows the named pipe
// file system keeps such an instance out of reach of clients (go-winio pipe.go,
// makeServerPipeHandle: "By not asking for read or write access, the named pipe file system will
// put this pipe into an initially disconnected state, blocking client connections"), so a
// client gets the instance Accept makes (CreateFile on a busy pipe answers ERROR_PIPE_BUSY and
// go-winio's DialPipe retries: https://learn.microsoft.com/windows/win32/ipc/named-pipe-client).
func TestPipeFirstClient(t *testing.T) {
	for _, dialFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("dialFirst=%v", dialFirst), func(t *testing.T) {
			name := pipeName(t)
			l, err := winio.ListenPipe(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			roundTrip(t, l, name, dialFirst)
			// A second client too, after the first one.
			roundTrip(t, l, name, dialFirst)
		})
	}
}
