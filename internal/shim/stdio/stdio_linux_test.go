package stdio

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/fifo"
)

// logFilePathCases: on Linux a file URI's path is used as it is, cleaned.
var logFilePathCases = []logFilePathCase{
	{uri: "file:///var/log/c1.log", want: "/var/log/c1.log"},
	{uri: "file://localhost/var/log/c1.log", want: "/var/log/c1.log"},
	{uri: "file:///var/log/pods/../c1.log", want: "/var/log/c1.log"},
	{uri: "file:///var/log/my%20logs/c1.log", want: "/var/log/my logs/c1.log"},
	// Not a drive here: a folder named "C:".
	{uri: "file:///C:/dir/c1.log", want: "/C:/dir/c1.log"},
	{uri: "file://otherhost/var/log/c1.log"},
	{uri: "file://"},
}

// TestFIFOs: the shim side of containerd's FIFOs: the client opens them for reading (stdout)
// and writing (stdin) as containerd's cio does, and sees everything the process wrote.
func TestFIFOs(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin, stdout := filepath.Join(dir, "stdin"), filepath.Join(dir, "stdout")
	for _, p := range []string{stdin, stdout} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The client's ends, as containerd's cio opens them (non-blocking, in the background).
	clientOut, err := fifo.OpenFifo(ctx, stdout, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	clientIn, err := fifo.OpenFifo(ctx, stdin, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	up, err := Open(ctx, "ns", "c1", Config{Stdin: stdin, Stdout: stdout})
	if err != nil {
		t.Fatal(err)
	}
	procInR, procInW := io.Pipe()
	procOutR, procOutW := io.Pipe()
	r := NewRelay(ctx, up, Process{Stdin: procInW, Stdout: procOutR})
	// The process: cat.
	go func() {
		_, _ = io.Copy(procOutW, procInR)
		_ = procOutW.Close()
	}()
	if _, err := clientIn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	_ = clientIn.Close()
	r.CloseIO(time.Second)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(clientOut)
		got <- b
	}()
	select {
	case b := <-got:
		if string(b) != "ping\n" {
			t.Errorf("client read %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client never saw EOF")
	}
	<-r.Drained()
}

// TestBinaryLogger: a binary:// logger gets stdout on fd 3 and stderr on fd 4 and the
// container's id in its environment, and is waited for when the streams close.
func TestBinaryLogger(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "logger")
	out := filepath.Join(dir, "out")
	body := "#!/bin/sh\nexec 5>&-\necho \"$CONTAINER_ID $CONTAINER_NAMESPACE\" > " + out + "\ncat <&3 >> " + out + "\ncat <&4 >> " + out + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	up, err := Open(context.Background(), "ns1", "c1", Config{Stdout: "binary://" + script, Stderr: "binary://" + script})
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	r := NewRelay(context.Background(), up, Process{Stdout: outR, Stderr: errR})
	go func() { _, _ = outW.Write([]byte("OUT\n")); _ = outW.Close() }()
	go func() { _, _ = errW.Write([]byte("ERR\n")); _ = errW.Close() }()
	select {
	case <-r.Drained():
	case <-time.After(20 * time.Second):
		t.Fatal("not drained")
	}
	b, _ := os.ReadFile(out)
	if string(b) != "c1 ns1\nOUT\nERR\n" {
		t.Errorf("logger wrote %q", b)
	}
}

// TestFIFOWaitsForReader: output is not written before containerd's client reads the FIFO, so
// a process that writes and exits at once loses nothing (a FIFO's buffer is discarded when
// its last descriptor closes).
func TestFIFOWaitsForReader(t *testing.T) {
	dir := t.TempDir()
	stdout := filepath.Join(dir, "stdout")
	if err := syscall.Mkfifo(stdout, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan *Upstream, 1)
	go func() {
		up, err := Open(context.Background(), "ns", "c1", Config{Stdout: stdout})
		if err != nil {
			t.Error(err)
		}
		opened <- up
	}()
	select {
	case <-opened:
		t.Fatal("Open returned before the client opened its reader")
	case <-time.After(200 * time.Millisecond):
	}
	client, err := fifo.OpenFifo(context.Background(), stdout, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var up *Upstream
	select {
	case up = <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("Open did not return once the client read")
	}
	outR, outW := io.Pipe()
	r := NewRelay(context.Background(), up, Process{Stdout: outR})
	go func() { _, _ = outW.Write([]byte("quick exit")); _ = outW.Close() }()
	<-r.Drained()
	b, err := io.ReadAll(client)
	if err != nil || string(b) != "quick exit" {
		t.Errorf("client read %q, %v", b, err)
	}
}

// TestFIFOOpenBounded: when no client ever reads, Open gives up with its context.
func TestFIFOOpenBounded(t *testing.T) {
	stdout := filepath.Join(t.TempDir(), "stdout")
	if err := syscall.Mkfifo(stdout, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, "ns", "c1", Config{Stdout: stdout}); err == nil {
		t.Fatal("Open succeeded without a reader")
	}
}
