package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListenConnect runs the echo server and client of the networking tests against each
// other on loopback.
func TestListenConnect(t *testing.T) {
	pr, pw := io.Pipe()
	go run([]string{"listen", "127.0.0.1:0"}, nil, pw, io.Discard)
	// The server's lines, read as it writes them (a pipe's write waits for its reader).
	lines := make(chan string, 10)
	go func() {
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	line := <-lines
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("listen printed %q, want \"listening ADDRESS\"", line)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"connect", addr, "hello pod"}, nil, &out, &errb); code != 0 {
		t.Fatalf("connect exited %d: %s", code, errb.String())
	}
	if got := out.String(); got != "echo: hello pod\n" {
		t.Errorf("connect printed %q, want %q", got, "echo: hello pod\n")
	}
	// The server names the client's address (loopback here).
	if line = <-lines; !strings.HasPrefix(line, "accepted from 127.0.0.1:") {
		t.Errorf("listen printed %q, want \"accepted from 127.0.0.1:PORT\"", line)
	}
}

// TestConnectRefused checks that connect fails (exit 1, the error on stderr) when nothing
// listens, after its retries.
func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	var out, errb bytes.Buffer
	if code := run([]string{"connect", addr, "x"}, nil, &out, &errb); code != 1 {
		t.Fatalf("connect to a closed port exited %d (stdout %q), want 1", code, out.String())
	}
	if !strings.Contains(errb.String(), "refused") {
		t.Errorf("stderr %q does not say the connection was refused", errb.String())
	}
	if time.Since(start) < connectRetry {
		t.Errorf("connect gave up after %v, before its %v of retries", time.Since(start), connectRetry)
	}
}

// TestHTTP gets from the HTTP server with Go's client: a status line, headers and the text.
func TestHTTP(t *testing.T) {
	pr, pw := io.Pipe()
	go run([]string{"http", "127.0.0.1:0", "hello from a pod"}, nil, pw, io.Discard)
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("http printed %q, want \"listening ADDRESS\"", line)
	}
	for range 2 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "hello from a pod" {
			t.Fatalf("GET: %s %q, %v; want 200 and the text", resp.Status, body, err)
		}
	}
}

// TestUDP: every datagram is answered with the text.
func TestUDP(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		// A server that cannot start ends the pipe with why, instead of leaving the test
		// waiting for its first line.
		var errb bytes.Buffer
		code := run([]string{"udp", "127.0.0.1:0", "backend-1"}, nil, pw, &errb)
		pw.CloseWithError(fmt.Errorf("udp exited %d: %s", code, errb.String()))
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("udp printed %q, want \"listening ADDRESS\"", line)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for range 2 {
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || got != "backend-1\n" {
			t.Fatalf("answer %q, %v; want the text and a newline", got, err)
		}
	}
}

func TestNetUsage(t *testing.T) {
	for _, args := range [][]string{{"listen"}, {"connect", "127.0.0.1:1"}, {"listen", "a", "b"}, {"http", "127.0.0.1:0"}, {"udp", "127.0.0.1:0"}} {
		var errb bytes.Buffer
		if code := run(args, nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "want ADDRESS") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a usage message", args, code, errb.String())
		}
	}
}

// TestResolve: resolve prints a name's IPv4 addresses (localhost from the hosts file through
// the system's resolver), refuses a bad command line, and fails for a name that does not exist.
func TestResolve(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"resolve", "127.0.0.1"}, nil, &out, &errb); code != 0 || out.String() != "127.0.0.1\n" {
		t.Errorf("resolve 127.0.0.1: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"resolve", "nothere.invalid"}, nil, &out, &errb); code != 1 || out.Len() != 0 {
		t.Errorf("resolve nothere.invalid: exit %d, stdout %q, stderr %q; want 1 and nothing", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := run([]string{"resolve"}, nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "want NAME") {
		t.Errorf("resolve without a name: exit %d, stderr %q", code, errb.String())
	}
}

// TestGet: get fetches the http server's text COUNT times and prints it a line each; a closed
// port prints an error line per request and exits 1; a bad URL or count is a usage error.
func TestGet(t *testing.T) {
	pr, pw := io.Pipe()
	go run([]string{"http", "127.0.0.1:0", "backend-a"}, nil, pw, io.Discard)
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening ")
	var out, errb bytes.Buffer
	if code := run([]string{"get", "http://" + addr + "/x", "3"}, nil, &out, &errb); code != 0 || out.String() != "backend-a\nbackend-a\nbackend-a\n" {
		t.Errorf("get 3: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	out.Reset()
	errb.Reset()
	if code := run([]string{"get", "http://" + closed + "/", "2"}, nil, &out, &errb); code != 1 ||
		strings.Count(out.String(), "error: ") != 2 || !strings.Contains(errb.String(), "2 of 2 requests") {
		t.Errorf("get from a closed port: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	for _, args := range [][]string{{"get"}, {"get", "ftp://x:1/"}, {"get", "http://nohost/"}, {"get", "http://x:1/", "0"}, {"get", "http://x:1/", "1", "2"}} {
		errb.Reset()
		if code := run(args, nil, io.Discard, &errb); code != 2 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a usage message", args, code, errb.String())
		}
	}
}
