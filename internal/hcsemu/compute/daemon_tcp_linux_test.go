package compute

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/server"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hcsemu/wire/wiretest"
)

// The daemon's TCP transport, as the stand-in DLLs use it, driven through a real engine: a
// control connection (tcpClient) and the AttachStdio connections of a process's streams.
// internal/hcsemu/server tests the transport itself, without an engine.

// testKey is the TCP key of every server these tests start.
var testKey = func() string {
	k, err := server.NewTCPKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// tcpClient is a control connection as the stand-in computecore.dll makes one.
type tcpClient struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	id     uint64
	events []wire.Event
}

func dialTCP(t *testing.T, addr string) *tcpClient {
	t.Helper()
	return dialTCPWithKey(t, addr, testKey)
}

func dialTCPWithKey(t *testing.T, addr, key string) *tcpClient {
	t.Helper()
	c := wiretest.Dial(t, addr, key)
	return &tcpClient{t: t, c: c, r: bufio.NewReader(c)}
}

// call sends a request and returns its response; events read meanwhile are kept.
func (c *tcpClient) call(method string, args any) *wire.Frame {
	c.t.Helper()
	c.id++
	req, err := wire.NewRequest(c.id, method, args)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := wire.WriteFrame(c.c, req); err != nil {
		c.t.Fatal(err)
	}
	for {
		f := c.next()
		if f.Event == nil && f.ID == c.id {
			return f
		}
	}
}

func (c *tcpClient) next() *wire.Frame {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := wire.ReadFrame(c.r)
	if err != nil {
		c.t.Fatalf("read from hcsemu over TCP: %v", err)
	}
	if f.Event != nil {
		c.events = append(c.events, *f.Event)
	}
	return f
}

// processExit waits for the ProcessExited event of pid and returns its exit code.
func (c *tcpClient) processExit(pid uint32) uint32 {
	c.t.Helper()
	for i := 0; ; i++ {
		for _, ev := range c.events {
			if ev.Type == computecore.EventProcessExited && ev.PID == pid {
				var d schema2.ProcessExitedEventData
				if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
					c.t.Fatalf("exit event %q: %v", ev.Data, err)
				}
				return d.ExitCode
			}
		}
		c.next()
	}
}

// TestDaemonTCP drives one engine through both transports: a system made by a unix client is
// opened and run in over TCP, where requests, replies, HRESULTs and events are the unix
// socket's, and a process's stdio comes as a token and AttachStdio connections.
func TestDaemonTCP(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, _ := createSystem(t, api, "over-tcp", "", true)
	// A container ends with its last process: keep one running while the others come and go.
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})

	c := dialTCP(t, d.tcpAddr)
	if f := c.call(wire.MethodOpenComputeSystem, wire.OpenSystemArgs{ID: "nonexistent"}); f.HResult != computecore.HCS_E_SYSTEM_NOT_FOUND || !strings.Contains(f.Result, "nonexistent") {
		t.Errorf("open of an unknown system over TCP: hresult %#x, result %s; want HCS_E_SYSTEM_NOT_FOUND naming it", f.HResult, f.Result)
	}
	f := c.call(wire.MethodOpenComputeSystem, wire.OpenSystemArgs{ID: "over-tcp"})
	var sys wire.SystemReply
	if err := f.DecodeReply(&sys); err != nil || f.HResult != 0 || sys.Instance == 0 {
		t.Fatalf("open over TCP: hresult %#x, reply %s, %v", f.HResult, f.Reply, err)
	}
	ref := wire.SystemRef{ID: "over-tcp", Instance: sys.Instance}

	tests := []struct {
		name            string
		params          schema2.ProcessParameters
		input           string
		stdout, stderr  string
		wantStdio       [3]bool
		console, outHas bool
	}{
		{name: "pipes", params: schema2.ProcessParameters{CommandLine: prog + " cat", CreateStdInPipe: true, CreateStdOutPipe: true, CreateStdErrPipe: true},
			input: "through stdin and back\n", stdout: "through stdin and back\n", wantStdio: [3]bool{true, true, true}},
		{name: "stderr", params: schema2.ProcessParameters{CommandLine: prog + " stderr oops", CreateStdOutPipe: true, CreateStdErrPipe: true},
			stderr: "oops\n", wantStdio: [3]bool{false, true, true}},
		{name: "console", params: schema2.ProcessParameters{CommandLine: prog + " tty", EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true},
			stdout: "tty\r\n", wantStdio: [3]bool{true, true, false}, console: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			doc, _ := json.Marshal(tc.params)
			f := c.call(wire.MethodCreateProcess, wire.CreateProcessArgs{System: ref, Parameters: string(doc)})
			var pr wire.ProcessReply
			if err := f.DecodeReply(&pr); err != nil || f.HResult != 0 {
				t.Fatalf("create process: hresult %#x, result %s, reply %s, %v", f.HResult, f.Result, f.Reply, err)
			}
			if f.FDs != 0 || pr.StdioToken == "" || pr.Stdio != tc.wantStdio || pr.Console != tc.console || pr.PID == 0 {
				t.Fatalf("reply %s with %d descriptors: want a pid, stdio %v, console %v, a token and no descriptors", f.Reply, f.FDs, tc.wantStdio, tc.console)
			}
			var streams [3]*net.TCPConn
			for slot, ok := range pr.Stdio {
				if ok {
					streams[slot] = wiretest.AttachStdio(t, d.tcpAddr, testKey, pr.StdioToken, slot)
				}
			}
			outputs := [3]chan string{}
			for _, slot := range []int{wire.StdOut, wire.StdErr} {
				if streams[slot] != nil {
					outputs[slot] = make(chan string, 1)
					go func() {
						b, _ := io.ReadAll(streams[slot])
						outputs[slot] <- string(b)
					}()
				}
			}
			if in := streams[wire.StdIn]; in != nil {
				if _, err := io.WriteString(in, tc.input); err != nil {
					t.Fatal(err)
				}
				in.CloseWrite()
			}
			for slot, want := range map[int]string{wire.StdOut: tc.stdout, wire.StdErr: tc.stderr} {
				if outputs[slot] == nil {
					continue
				}
				select {
				case got := <-outputs[slot]:
					if got != want {
						t.Errorf("slot %d carried %q, want %q", slot, got, want)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("slot %d: no end of file within 30s", slot)
				}
			}
			if code := c.processExit(pr.PID); code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
			c.call(wire.MethodCloseProcess, wire.ProcessArgs{Process: wire.ProcessRef{System: ref, PID: pr.PID}})
		})
	}
	c.t = t
	if f := c.call(wire.MethodGetServiceProperties, wire.QueryArgs{}); f.HResult != 0 || !strings.Contains(f.Result, "20348") {
		t.Errorf("service properties over TCP: hresult %#x, %s", f.HResult, f.Result)
	}
}
