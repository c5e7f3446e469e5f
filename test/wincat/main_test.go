package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

// TestRelay runs wincat against a loopback server that answers each line it reads and closes
// after stdin's end reached it: everything stdin held arrives, every answer comes back, and
// wincat exits 0 when the server is done.
func TestRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s := bufio.NewScanner(c)
		for s.Scan() { // ends at the client's CloseWrite
			io.WriteString(c, "got "+s.Text()+"\n")
		}
		io.WriteString(c, "bye\n")
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	var out, errb bytes.Buffer
	if code := run([]string{host, port}, strings.NewReader("one\ntwo\n"), &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if want := "got one\ngot two\nbye\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
}

func TestErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{host}, 2, "want HOST PORT"},
		{[]string{host, port}, 1, "refused"},
	} {
		var errb bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), io.Discard, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}
