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

// TestRelayFileDrained: all output written before the process's streams close is in the file
// when Drained fires, stdout and stderr both.
func TestRelayFileDrained(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "log")
	up, err := Open(context.Background(), "ns", "c1", Config{Stdout: "file://" + path, Stderr: "file://" + path})
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
