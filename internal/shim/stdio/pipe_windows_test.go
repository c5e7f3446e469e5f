package stdio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/wintest"
)

// These tests run the Windows stdio path for real (under Wine on Linux, see hack/wine): on
// Windows containerd's client creates a named pipe per stream and the shim dials it
// (containerd pkg/cio's Windows side listens with go-winio), so here the test is containerd.

// containerdPipe is containerd's end of one stream: a go-winio listener and the connection the
// shim makes to it.
type containerdPipe struct {
	name     string
	accepted chan net.Conn
}

// listenPipe serves name until the test ends and hands over the shim's connection.
func listenPipe(t *testing.T, name string) *containerdPipe {
	t.Helper()
	l := wintest.ListenPipe(t, name)
	p := &containerdPipe{name: name, accepted: make(chan net.Conn, 1)}
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(p.accepted)
			return
		}
		t.Cleanup(func() { _ = c.Close() })
		p.accepted <- c
	}()
	return p
}

// conn waits for the shim's connection.
func (p *containerdPipe) conn(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c, ok := <-p.accepted:
		if !ok {
			t.Fatalf("%s: listener closed before the shim connected", p.name)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the shim did not connect within 10s", p.name)
	}
	return nil
}

// notConnected fails if the shim connects within a short while.
func (p *containerdPipe) notConnected(t *testing.T) {
	t.Helper()
	select {
	case c, ok := <-p.accepted:
		if ok {
			t.Errorf("%s: the shim connected to a stream it must leave alone (%v)", p.name, c.LocalAddr())
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func pipeName(t *testing.T, stream string) string {
	r := strings.NewReplacer("/", "-", " ", "-")
	return fmt.Sprintf(`\\.\pipe\runhcs-test-%d-%s-%s`, os.Getpid(), r.Replace(t.Name()), stream)
}

// writeAsync writes in the background: pipes made as containerd makes them (ListenPipe with
// no buffer sizes) may accept a write only once the other end reads it, as under Wine.
func writeAsync(w io.Writer, msg string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte(msg))
		done <- err
	}()
	return done
}

func readN(t *testing.T, what string, r io.Reader, n int) string {
	t.Helper()
	b := make([]byte, n)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(r, b)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: read %d bytes: %v", what, n, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing arrived within 10s", what)
	}
	return string(b)
}

// TestOpenNamedPipes: Open dials the pipes containerd named, each stream flows the right way,
// and a terminal's stderr pipe is left unused (one output stream, as with runc).
func TestOpenNamedPipes(t *testing.T) {
	tests := []struct {
		name                  string
		stdin, stdout, stderr bool
		terminal              bool
	}{
		{name: "all streams", stdin: true, stdout: true, stderr: true},
		{name: "output only", stdout: true, stderr: true},
		{name: "stdin only", stdin: true},
		{name: "terminal", stdin: true, stdout: true, stderr: true, terminal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			pipes := map[string]*containerdPipe{}
			for _, s := range []struct {
				name string
				want bool
				dst  *string
			}{{"stdin", tc.stdin, &cfg.Stdin}, {"stdout", tc.stdout, &cfg.Stdout}, {"stderr", tc.stderr, &cfg.Stderr}} {
				if s.want {
					pipes[s.name] = listenPipe(t, pipeName(t, s.name))
					*s.dst = pipes[s.name].name
				}
			}
			cfg.Terminal = tc.terminal
			up, err := Open(context.Background(), "ns", "c1", cfg)
			if err != nil {
				t.Fatalf("Open(%+v): %v", cfg, err)
			}
			defer up.Close()

			if tc.stdin {
				if up.Stdin == nil {
					t.Fatal("stdin pipe named but Upstream.Stdin is nil")
				}
				wrote := writeAsync(pipes["stdin"].conn(t), "to the process")
				if got := readN(t, "stdin", up.Stdin, len("to the process")); got != "to the process" {
					t.Errorf("stdin carried %q", got)
				}
				if err := <-wrote; err != nil {
					t.Errorf("containerd writes stdin: %v", err)
				}
			} else if up.Stdin != nil {
				t.Error("no stdin pipe named but Upstream.Stdin is set")
			}
			outputs := []string{"stdout", "stderr"}
			if tc.terminal {
				outputs = outputs[:1]
				if up.Stderr != nil {
					t.Error("terminal: Upstream.Stderr is set, want nil")
				}
				pipes["stderr"].notConnected(t)
			}
			for _, stream := range outputs {
				w := up.Stdout
				if stream == "stderr" {
					w = up.Stderr
				}
				if pipes[stream] == nil {
					if w != nil {
						t.Errorf("no %s pipe named but the stream is set", stream)
					}
					continue
				}
				if w == nil {
					t.Fatalf("%s pipe named but the stream is nil", stream)
				}
				msg := "from the process on " + stream
				wrote := writeAsync(w, msg)
				if got := readN(t, stream, pipes[stream].conn(t), len(msg)); got != msg {
					t.Errorf("%s carried %q", stream, got)
				}
				if err := <-wrote; err != nil {
					t.Errorf("write %s: %v", stream, err)
				}
			}
		})
	}
}

// TestOpenMissingPipe: a pipe nobody serves is an error that names it, returned at once rather
// than after the 30 s dial timeout (that timeout is for a busy pipe, not a missing one).
func TestOpenMissingPipe(t *testing.T) {
	missing := pipeName(t, "stdout")
	start := time.Now()
	_, err := Open(context.Background(), "ns", "c1", Config{Stdout: missing})
	if err == nil {
		t.Fatalf("Open of the missing pipe %s succeeded", missing)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error does not name the pipe %s: %v", missing, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Open took %v to fail", d)
	}
}

// TestRelayOverPipes: the whole relay over real pipes: containerd's stdin reaches the process
// and its end closes the process's stdin; the process's output reaches containerd, and once
// the process's streams end, Drained fires and containerd sees end of file.
func TestRelayOverPipes(t *testing.T) {
	in, out, errp := listenPipe(t, pipeName(t, "stdin")), listenPipe(t, pipeName(t, "stdout")), listenPipe(t, pipeName(t, "stderr"))
	up, err := Open(context.Background(), "ns", "c1", Config{Stdin: in.name, Stdout: out.name, Stderr: errp.name})
	if err != nil {
		t.Fatal(err)
	}
	procInR, procInW := io.Pipe()
	procOutR, procOutW := io.Pipe()
	procErrR, procErrW := io.Pipe()
	r := NewRelay(context.Background(), up, Process{Stdin: procInW, Stdout: procOutR, Stderr: procErrR})
	defer r.Close()

	stdinConn := in.conn(t)
	wrote := writeAsync(stdinConn, "input")
	go func() {
		<-wrote
		_ = stdinConn.Close() // containerd's client is done with stdin
	}()
	gotIn, err := io.ReadAll(procInR)
	if err != nil || string(gotIn) != "input" {
		t.Errorf("process stdin got %q, %v; want %q then EOF", gotIn, err, "input")
	}

	big := bytes.Repeat([]byte("0123456789"), 100_000) // more than a pipe buffer
	go func() {
		_, _ = procOutW.Write(big)
		_ = procOutW.Close()
	}()
	go func() {
		_, _ = procErrW.Write([]byte("oops"))
		_ = procErrW.Close()
	}()
	outDone := make(chan []byte, 1)
	errDone := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(out.conn(t)); outDone <- b }()
	go func() { b, _ := io.ReadAll(errp.conn(t)); errDone <- b }()
	select {
	case <-r.Drained():
	case <-time.After(20 * time.Second):
		t.Fatal("relay not drained 20s after the process's streams ended")
	}
	for _, c := range []struct {
		name string
		ch   chan []byte
		want []byte
	}{{"stdout", outDone, big}, {"stderr", errDone, []byte("oops")}} {
		select {
		case got := <-c.ch:
			if !bytes.Equal(got, c.want) {
				t.Errorf("containerd's %s got %d bytes, want %d", c.name, len(got), len(c.want))
			}
		case <-time.After(10 * time.Second):
			t.Errorf("containerd's %s did not see end of file after Drained", c.name)
		}
	}
}

// logFilePathCases: on Windows the slash containerd's LogURIGenerator puts before the drive is
// dropped and the path uses backslashes.
var logFilePathCases = []logFilePathCase{
	{uri: "file:///C:/dir/c1.log", want: `C:\dir\c1.log`},
	{uri: "file:///c:/dir/c1.log", want: `c:\dir\c1.log`},
	{uri: "file://localhost/C:/dir/c1.log", want: `C:\dir\c1.log`},
	{uri: "file:///C:/dir/pods/../c1.log", want: `C:\dir\c1.log`},
	{uri: "file:///D:/My%20Logs/c1.log", want: `D:\My Logs\c1.log`},
	{uri: "file:////server/share/c1.log", want: `\\server\share\c1.log`},
	// Rooted on whatever drive the shim's working directory is on: refused.
	{uri: "file:///dir/c1.log"},
	{uri: "file:///C:"},
	// file://C:/… (two slashes) makes "C:" the host.
	{uri: "file://C:/dir/c1.log"},
	{uri: "file://server/share/c1.log"},
	{uri: "file://"},
}

// TestLogFileURIWindows: containerd's Windows clients send a log file as file:///C:/dir/log
// (pkg/cio.LogURIGenerator adds the third slash and uses forward slashes); the shim must write
// that file.
func TestLogFileURIWindows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "c1.log")
	uri := "file:///" + filepath.ToSlash(path)
	// A shim that opens the URI's path as it is ("/C:/…") writes somewhere else: under Wine,
	// below the Linux root. Remove what such a bug made, through the same wrong path, and then
	// its parents while they are empty (os.Remove fails on a folder with anything in it).
	t.Cleanup(func() {
		wrong := "/" + filepath.ToSlash(dir)
		_ = os.RemoveAll(wrong)
		for p := filepath.Dir(wrong); len(p) > 1 && !strings.HasSuffix(p, `\`); p = filepath.Dir(p) {
			if os.Remove(p) != nil {
				break
			}
		}
	})
	up, err := Open(context.Background(), "ns", "c1", Config{Stdout: uri, Stderr: uri})
	if err != nil {
		t.Fatalf("Open(stdout %q): %v", uri, err)
	}
	if _, err := up.Stdout.Write([]byte("logged")); err != nil {
		t.Fatal(err)
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "logged" {
		t.Errorf("%s holds %q, %v; want %q", path, b, err, "logged")
	}
}
