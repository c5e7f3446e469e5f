package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hcsemu/wire/wiretest"
)

// The TCP transport's stdio, without an engine: a server whose stdio table is filled directly
// with pipes that stand for a process's, as conn.handle fills it from a CreateProcess. These
// run without root. TestDaemonTCP drives the whole path through a real engine.

// serveStdio serves only AttachStdio connections (no engine: a control connection would
// panic) on a loopback port; the server is stopped at the end of the test.
func serveStdio(t *testing.T, timeout time.Duration) (*Server, string) {
	t.Helper()
	s := &Server{stdio: newStdioTable(timeout)}
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeTCP(context.Background(), ln, testKey) }()
	t.Cleanup(func() {
		ln.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeTCP: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeTCP did not return within 10s of its listener's close")
		}
		s.stdio.close()
	})
	return s, ln.Addr().String()
}

// testKey is the TCP key of every server these tests start.
var testKey = func() string {
	k, err := NewTCPKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// readAllWithin reads r to its end, failing the test if that takes longer than d. A pseudo
// console's EIO counts as the end.
func readAllWithin(t *testing.T, what string, r io.Reader, d time.Duration) string {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		got <- result{b, err}
	}()
	select {
	case res := <-got:
		if res.err != nil && !errors.Is(res.err, syscall.EIO) {
			t.Errorf("%s: %v", what, res.err)
		}
		return string(res.b)
	case <-time.After(d):
		t.Fatalf("%s: no end of file within %s", what, d)
	}
	return ""
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestTCPStdio: each stream of a reply flows over its own AttachStdio connection: stdin to
// the process until the client's half-close, which ends the process's input; outputs back
// until the process's end of file; with a console, slots 0 and 1 are the one master. A token
// is single-use.
func TestTCPStdio(t *testing.T) {
	s, addr := serveStdio(t, AttachTimeout)
	tests := []struct {
		name  string
		reply wire.ProcessReply
		// files makes the client's ends to register (in slot order, as a reply sends them)
		// and the process's end of each slot.
		files func(t *testing.T) (client []*os.File, proc [3]*os.File)
	}{
		{"stdin stdout stderr", wire.ProcessReply{PID: 9, Stdio: [3]bool{true, true, true}}, func(t *testing.T) ([]*os.File, [3]*os.File) {
			inR, inW := pipe(t)
			outR, outW := pipe(t)
			errR, errW := pipe(t)
			return []*os.File{inW, outR, errR}, [3]*os.File{inR, outW, errW}
		}},
		{"stdout only", wire.ProcessReply{PID: 10, Stdio: [3]bool{false, true, false}}, func(t *testing.T) ([]*os.File, [3]*os.File) {
			outR, outW := pipe(t)
			return []*os.File{outR}, [3]*os.File{nil, outW, nil}
		}},
		{"stdin and stderr", wire.ProcessReply{PID: 11, Stdio: [3]bool{true, false, true}}, func(t *testing.T) ([]*os.File, [3]*os.File) {
			inR, inW := pipe(t)
			errR, errW := pipe(t)
			return []*os.File{inW, errR}, [3]*os.File{inR, nil, errW}
		}},
		{"console", wire.ProcessReply{PID: 12, Stdio: [3]bool{true, true, false}, Console: true}, func(t *testing.T) ([]*os.File, [3]*os.File) {
			// A socket pair stands for the pseudo console: one end is the master the
			// client gets, the other the process's terminal.
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			master, tty := os.NewFile(uintptr(fds[0]), "master"), os.NewFile(uintptr(fds[1]), "tty")
			t.Cleanup(func() { master.Close(); tty.Close() })
			return []*os.File{master}, [3]*os.File{tty, tty, nil}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, proc := tc.files(t)
			token, err := s.stdio.add(context.Background(), tc.reply, client)
			if err != nil {
				t.Fatal(err)
			}
			if len(token) < 20 {
				t.Fatalf("token %q: want an unguessable one", token)
			}
			var streams [3]*net.TCPConn
			for slot, ok := range tc.reply.Stdio {
				if ok {
					streams[slot] = wiretest.AttachStdio(t, addr, testKey, token, slot)
				}
			}
			if streams[wire.StdIn] != nil {
				msg := "into stdin of " + tc.name
				if _, err := io.WriteString(streams[wire.StdIn], msg); err != nil {
					t.Fatal(err)
				}
				streams[wire.StdIn].CloseWrite()
				if tc.reply.Console {
					// The end of the client's input closes only its descriptor of the
					// master: the terminal stays open for output.
					got := make([]byte, len(msg))
					if _, err := io.ReadFull(proc[wire.StdIn], got); err != nil || string(got) != msg {
						t.Errorf("stdin carried %q, %v; want %q", got, err, msg)
					}
				} else if got := readAllWithin(t, "stdin", proc[wire.StdIn], 10*time.Second); got != msg {
					t.Errorf("stdin carried %q, want %q then end of file", got, msg)
				}
			}
			for _, slot := range []int{wire.StdOut, wire.StdErr} {
				if streams[slot] == nil {
					continue
				}
				msg := "out of slot " + string(rune('0'+slot)) + " of " + tc.name
				if _, err := io.WriteString(proc[slot], msg); err != nil {
					t.Fatal(err)
				}
				proc[slot].Close()
				if got := readAllWithin(t, "slot", streams[slot], 10*time.Second); got != msg {
					t.Errorf("slot %d carried %q, want %q then end of file", slot, got, msg)
				}
			}
			// Single use: a second attach of a slot gets nothing and is closed; so does a slot
			// the reply has no stream for.
			for slot := range 3 {
				c := wiretest.AttachStdio(t, addr, testKey, token, slot)
				if got := readAllWithin(t, "second attach", c, 10*time.Second); got != "" {
					t.Errorf("second attach of slot %d read %q", slot, got)
				}
			}
			if s.stdio.waiting(token) {
				t.Errorf("stdio table keeps streams of %s after every slot attached", tc.name)
			}
		})
	}
}

// TestTCPAttachRefused: a stream connection with a bad first frame after the key, a token that
// is unknown, guessed, altered or another daemon's among them, is closed without a byte and
// takes no stream.
func TestTCPAttachRefused(t *testing.T) {
	s, addr := serveStdio(t, AttachTimeout)
	r, w := pipe(t)
	token, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 3, Stdio: [3]bool{false, true, false}}, []*os.File{r})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(body string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	attach := func(token string) []byte {
		return frame(`{"id":1,"method":"AttachStdio","args":{"token":"` + token + `","slot":1}}`)
	}
	// A token of another daemon's (a stale one, from before a restart): each server has its own.
	other, _ := serveStdio(t, AttachTimeout)
	otherR, _ := pipe(t)
	stale, err := other.stdio.add(context.Background(), wire.ProcessReply{PID: 3, Stdio: [3]bool{false, true, false}}, []*os.File{otherR})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"unknown token", attach("nope")},
		{"guessed token", attach(rand.Text())},
		{"the token in lower case", attach(strings.ToLower(token))},
		{"the token less its last character", attach(token[:len(token)-1])},
		{"another daemon's token", attach(stale)},
		{"empty token", attach("")},
		{"slot out of range", frame(`{"id":1,"method":"AttachStdio","args":{"token":"` + token + `","slot":7}}`)},
		{"unknown field", frame(`{"id":1,"method":"AttachStdio","args":{"token":"` + token + `","slot":1,"pid":3}}`)},
		{"descriptors claimed", frame(`{"id":1,"method":"AttachStdio","fds":1,"args":{"token":"` + token + `","slot":1}}`)},
		{"not json", frame(`{{{`)},
		{"frame too large", binary.BigEndian.AppendUint32(nil, wire.MaxFrameSize+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := wiretest.Dial(t, addr, testKey)
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if got := readAllWithin(t, tc.name, c, 10*time.Second); got != "" {
				t.Errorf("read %q, want the connection closed", got)
			}
		})
	}
	// None of them took the stream: it still flows to the right attach.
	c := wiretest.AttachStdio(t, addr, testKey, token, wire.StdOut)
	io.WriteString(w, "still here")
	w.Close()
	if got := readAllWithin(t, "stdout", c, 10*time.Second); got != "still here" {
		t.Errorf("stdout carried %q after the refused attaches", got)
	}
}

// TestTCPStdioExpiry: streams nobody attaches are closed after the timeout, as if the client
// had closed its ends: the process reads the end of its input and cannot write its output.
func TestTCPStdioExpiry(t *testing.T) {
	s, addr := serveStdio(t, 200*time.Millisecond)
	inR, inW := pipe(t)
	outR, outW := pipe(t)
	token, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 4, Stdio: [3]bool{true, true, false}}, []*os.File{inW, outR})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllWithin(t, "unattached stdin", inR, 10*time.Second); got != "" {
		t.Errorf("unattached stdin carried %q", got)
	}
	for deadline := time.Now().Add(10 * time.Second); s.stdio.waiting(token); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stdio table keeps the streams 10s after their expiry")
		}
	}
	if _, err := outW.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to an expired stdout: %v, want EPIPE", err)
	}
	if got := readAllWithin(t, "attach after expiry", wiretest.AttachStdio(t, addr, testKey, token, wire.StdOut), 10*time.Second); got != "" {
		t.Errorf("attach after expiry read %q", got)
	}
}

// TestTCPShutdown: closing the listener ends the relays of processes still running, and
// closing the table closes the streams still waiting and refuses new ones, so that the daemon
// never waits on its processes before it terminates them.
func TestTCPShutdown(t *testing.T) {
	s := &Server{stdio: newStdioTable(AttachTimeout)}
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeTCP(context.Background(), ln, testKey) }()

	relayedR, relayedW := pipe(t) // a process that writes nothing and never ends
	waitingR, waitingW := pipe(t) // a stream nobody attaches
	relayed, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 5, Stdio: [3]bool{false, true, false}}, []*os.File{relayedR})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 6, Stdio: [3]bool{false, true, false}}, []*os.File{waitingR}); err != nil {
		t.Fatal(err)
	}
	c := wiretest.AttachStdio(t, ln.Addr().String(), testKey, relayed, wire.StdOut)
	// The attach is under way once the table no longer holds the stream.
	for deadline := time.Now().Add(10 * time.Second); s.stdio.waiting(relayed); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream was not attached within 10s")
		}
	}
	ln.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeTCP: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeTCP waits on a relay of a running process")
	}
	if got := readAllWithin(t, "relayed stream", c, 10*time.Second); got != "" {
		t.Errorf("relayed stream read %q", got)
	}
	if _, err := relayedW.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to a relay ended by shutdown: %v, want EPIPE", err)
	}

	s.stdio.close()
	if _, err := waitingW.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to a stream waiting at shutdown: %v, want EPIPE", err)
	}
	r, _ := pipe(t)
	if _, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 7, Stdio: [3]bool{false, true, false}}, []*os.File{r}); err == nil {
		t.Error("add after close kept a stream")
	}
}

// waiting reports whether the table still holds a stream or a timer of token.
func (t *stdioTable) waiting(token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, timer := t.timers[token]
	return timer || t.waitingLocked(token)
}
