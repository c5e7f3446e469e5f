package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// fakeHcsemu answers every request on a unix socket: CreateProcess with the stdio pipes its
// reply names (descriptors over SCM_RIGHTS, as hcsemu sends them), anything else with an empty
// success. The process ends of the pipes go to procs.
func fakeHcsemu(t *testing.T, sock string, reply wire.ProcessReply, procs chan<- []*os.File) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			uc, err := l.AcceptUnix()
			if err != nil {
				return
			}
			wc := wire.NewConn(uc)
			go func() {
				defer wc.Close()
				for {
					f, _, err := wc.Receive()
					if err != nil {
						return
					}
					out := &wire.Frame{ID: f.ID}
					if f.Method != wire.MethodCreateProcess {
						_ = wc.Send(out)
						continue
					}
					var mine, theirs []*os.File
					var fds []int
					n := 0
					for _, ok := range reply.Stdio {
						if ok {
							n++
						}
					}
					if reply.Console {
						n = 1
					}
					for i := 0; i < n; i++ {
						r, w, err := os.Pipe()
						if err != nil {
							t.Error(err)
							return
						}
						// Slot order: stdin's client end is the write end, outputs' the read end.
						if i == 0 && reply.Stdio[wire.StdIn] && !reply.Console {
							mine, theirs = append(mine, r), append(theirs, w)
						} else {
							mine, theirs = append(mine, w), append(theirs, r)
						}
						fds = append(fds, int(theirs[i].Fd()))
					}
					out.Reply, _ = json.Marshal(reply)
					_ = wc.Send(out, fds...)
					for _, f := range theirs {
						_ = f.Close()
					}
					procs <- mine
				}
			}()
		}
	}()
}

func writeTCPFrame(t *testing.T, c net.Conn, f *wire.Frame) {
	t.Helper()
	if err := writeFrame(c, f); err != nil {
		t.Fatal(err)
	}
}

// TestStdioOverTCP: a process reply's descriptors become a stdioToken, and each stream flows
// over its AttachStdio connection: stdin to the process (a half-close ends it), outputs back.
func TestStdioOverTCP(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "hcsemu.sock")
	procs := make(chan []*os.File, 1)
	fakeHcsemu(t, sock, wire.ProcessReply{PID: 9, Stdio: [3]bool{true, true, true}}, procs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrFile := filepath.Join(dir, "addr")
	go func() { _ = run(ctx, "127.0.0.1:0", sock, addrFile) }()
	var addr []byte
	for i := 0; i < 100 && len(addr) == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		addr, _ = os.ReadFile(addrFile)
	}
	if len(addr) == 0 {
		t.Fatal("hcsemutcp wrote no address")
	}

	ctl, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	req, _ := wire.NewRequest(5, wire.MethodCreateProcess, wire.CreateProcessArgs{System: wire.SystemRef{ID: "c1", Instance: 1}, Parameters: "{}"})
	writeTCPFrame(t, ctl, req)
	resp, err := readFrame(bufio.NewReader(ctl))
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		wire.ProcessReply
		StdioToken string `json:"stdioToken"`
	}
	if err := json.Unmarshal(resp.Reply, &reply); err != nil {
		t.Fatal(err)
	}
	if resp.ID != 5 || resp.FDs != 0 || reply.PID != 9 || reply.StdioToken == "" {
		t.Fatalf("response %+v, reply %s: want id 5, no descriptors, pid 9 and a token", resp, resp.Reply)
	}
	proc := <-procs // the process's ends: stdin read end, stdout and stderr write ends

	streams := make([]net.Conn, 3)
	for slot := range streams {
		c, err := net.Dial("tcp", string(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f, _ := wire.NewRequest(1, methodAttachStdio, attachArgs{Token: reply.StdioToken, Slot: slot})
		writeTCPFrame(t, c, f)
		streams[slot] = c
	}
	tests := []struct {
		name string
		from io.Writer
		to   io.Reader
		end  func()
	}{
		{"stdin", streams[0], proc[0], func() { _ = streams[0].(*net.TCPConn).CloseWrite() }},
		{"stdout", proc[1], streams[1], func() { _ = proc[1].Close() }},
		{"stderr", proc[2], streams[2], func() { _ = proc[2].Close() }},
	}
	for _, tc := range tests {
		msg := "through " + tc.name
		if _, err := io.WriteString(tc.from, msg); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tc.end()
		got := make(chan string, 1)
		go func() { b, _ := io.ReadAll(tc.to); got <- string(b) }()
		select {
		case g := <-got:
			if g != msg {
				t.Errorf("%s carried %q, want %q then end of file", tc.name, g, msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no end of file within 10s", tc.name)
		}
	}

	// A token is single-use: a second attach of a slot gets nothing and is closed.
	c, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, _ := wire.NewRequest(1, methodAttachStdio, attachArgs{Token: reply.StdioToken, Slot: 1})
	writeTCPFrame(t, c, f)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("second attach of slot 1: read %d, %v; want the connection closed", n, err)
	}
}

func TestListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:9345", "localhost-ish:1", "nonsense"} {
		if err := run(context.Background(), addr, "/nonexistent", ""); err == nil {
			t.Errorf("run(%q) served a non-loopback address", addr)
		}
	}
}
