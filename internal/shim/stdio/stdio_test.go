package stdio

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
)

func TestLogURI(t *testing.T) {
	tests := []struct {
		in     string
		scheme string
		ok     bool
	}{
		{"/run/containerd/fifo/1/c1-stdout", "", false},
		{`\\.\pipe\containerd-c1-stdout`, "", false},
		{"file:///var/log/c1.log", "file", true},
		{"binary:///usr/bin/logger?id=1", "binary", true},
		{"", "", false},
	}
	for _, tc := range tests {
		s, _, ok := logURI(tc.in)
		if s != tc.scheme || ok != tc.ok {
			t.Errorf("logURI(%q) = %q, %v", tc.in, s, ok)
		}
	}
}

// logFileURI is what containerd's clients send for a log file at path (pkg/cio.LogFile):
// file:///var/log/c1.log on Linux, file:///C:/dir/c1.log on Windows.
func logFileURI(t *testing.T, path string) string {
	t.Helper()
	u, err := cio.LogURIGenerator("file", path, nil)
	if err != nil {
		t.Fatalf("log URI of %s: %v", path, err)
	}
	return u.String()
}

// logFilePathCase is one file:// URI and the local path the shim must write (want), or ""
// when the URI must be refused as an invalid argument. The cases are per OS
// (logFilePathCases, in stdio_linux_test.go and pipe_windows_test.go).
type logFilePathCase struct {
	uri, want string
}

func TestLogFilePath(t *testing.T) {
	for _, tc := range logFilePathCases {
		_, u, ok := logURI(tc.uri)
		if !ok {
			t.Errorf("logURI(%q) did not see a URI", tc.uri)
			continue
		}
		got, err := logFilePath(u)
		switch {
		case tc.want == "" && !errdefs.IsInvalidArgument(err):
			t.Errorf("logFilePath(%q) = %q, %v; want an invalid-argument error", tc.uri, got, err)
		case tc.want == "" && !strings.Contains(err.Error(), u.String()):
			t.Errorf("logFilePath(%q): error does not name the URI %q: %v", tc.uri, u.String(), err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("logFilePath(%q) = %q, %v; want %q", tc.uri, got, err, tc.want)
		}
	}
}

// TestRelayFileDrained: all output written before the process's streams close is in the file
// when Drained fires, stdout and stderr both.
func TestRelayFileDrained(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "log")
	up, err := Open(context.Background(), "ns", "c1", Config{Stdout: logFileURI(t, path), Stderr: logFileURI(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	r := NewRelay(context.Background(), up, Process{Stdout: outR, Stderr: errR})
	big := strings.Repeat("x", 1<<20)
	go func() {
		_, _ = outW.Write([]byte(big))
		_ = outW.Close()
	}()
	go func() {
		_, _ = errW.Write([]byte("E"))
		_ = errW.Close()
	}()
	select {
	case <-r.Drained():
	case <-time.After(10 * time.Second):
		t.Fatal("not drained")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != len(big)+1 || strings.Count(string(b), "E") != 1 {
		t.Errorf("file has %d bytes, want %d", len(b), len(big)+1)
	}
}

// TestRelayStdin: stdin reaches the process and its end closes the process's stdin.
func TestRelayStdin(t *testing.T) {
	inR, inW := io.Pipe()
	procInR, procInW := io.Pipe()
	up := &Upstream{Stdin: inR}
	r := NewRelay(context.Background(), up, Process{Stdin: procInW})
	go func() {
		_, _ = inW.Write([]byte("hello"))
		_ = inW.Close()
	}()
	got, err := io.ReadAll(procInR)
	if err != nil || string(got) != "hello" {
		t.Errorf("process read %q, %v", got, err)
	}
	r.CloseIO(time.Second)
}

// TestRelayNoStdin: a process given a stdin pipe without upstream stdin gets EOF at once.
func TestRelayNoStdin(t *testing.T) {
	procInR, procInW := io.Pipe()
	NewRelay(context.Background(), &Upstream{}, Process{Stdin: procInW})
	done := make(chan struct{})
	go func() {
		_, _ = io.ReadAll(procInR)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("process stdin not closed")
	}
}

// TestRelayAbort: a process whose output never reaches EOF is cut off by Abort.
func TestRelayAbort(t *testing.T) {
	var buf bytes.Buffer
	outR, outW := io.Pipe()
	defer outW.Close()
	r := NewRelay(context.Background(), &Upstream{Stdout: nopWriteCloser{&buf}}, Process{Stdout: outR})
	r.Abort()
	select {
	case <-r.Drained():
	case <-time.After(5 * time.Second):
		t.Fatal("Abort did not end the relay")
	}
}

// TestOpenRefusesStreaming: the stdio of a CRI runtime with io_type = "streaming" (containerd
// 2.x internal/cri/io/streaming.go: <ttrpc|grpc>+<transport>://…?streaming_id=…) is refused as
// not implemented, naming the stream and its URI, before anything is opened.
func TestOpenRefusesStreaming(t *testing.T) {
	const uri = `ttrpc+npipe://\\.\pipe\containerd-shim-k8s.io-pod-pipe?streaming_id=c1-stdout`
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"stdout", Config{Stdout: uri}},
		{"stdin", Config{Stdin: "grpc+unix:///run/s.sock?streaming_id=c1-stdin"}},
		{"stderr", Config{Stderr: "ttrpc+unix:///run/s.sock?streaming_id=c1-stderr"}},
	} {
		_, err := Open(context.Background(), "k8s.io", "c1", c.cfg)
		if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), c.name+" ") || !strings.Contains(err.Error(), "streaming") {
			t.Errorf("%s: Open(%+v) = %v, want a not-implemented error naming %s and streaming I/O", c.name, c.cfg, err, c.name)
		}
	}
}
