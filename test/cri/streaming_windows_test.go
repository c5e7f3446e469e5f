//go:build windows

package cri

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

// Streaming: the CRI Exec, Attach and PortForward calls return a URL on containerd's streaming
// server (stream_server_address/port in the node's configuration), which kubelet proxies the API
// server's streams to. The protocol that reaches the runtime is SPDY: kubectl speaks WebSocket
// (v5.channel.k8s.io) to the API server, which translates it to SPDY toward the node.
// containerd's server (k8s.io/cri-streaming v0.37.0) takes WebSocket only in the v1 to v4
// channel protocols, without v5's stdin close, which client-go's WebSocket executor requires;
// so these tests use client-go's SPDY executor, the client the API server and kubelet use.

// executor is client-go's SPDY remote command executor for a streaming URL.
func executor(t *testing.T, streamURL string) remotecommand.Executor {
	t.Helper()
	u, err := url.Parse(streamURL)
	if err != nil {
		t.Fatalf("streaming URL %q: %v", streamURL, err)
	}
	// The streaming server is plain HTTP on the node's loopback (enable_tls_streaming off, as
	// containerd's default); a zero rest.Config is a client with no credentials and no TLS.
	e, err := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, u)
	if err != nil {
		t.Fatalf("SPDY executor for %s: %v", streamURL, err)
	}
	return e
}

// execURL asks the runtime for an exec's streaming URL.
func execURL(t *testing.T, n *node, req *runtimeapi.ExecRequest) string {
	t.Helper()
	resp, err := n.rt.Exec(ctx(t), req)
	if err != nil {
		t.Fatalf("Exec %q: %v", req.Cmd, err)
	}
	return resp.GetUrl()
}

// streamAll runs a stream to its end with generous time.
func streamAll(t *testing.T, e remotecommand.Executor, opts remotecommand.StreamOptions) error {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return e.StreamWithContext(c, opts)
}

// TestExecStream runs streaming execs without a TTY, as `kubectl exec -i`
// does: what the client writes to stdin reaches the process, stdout and stderr come back on
// their own streams, and a non-zero exit comes back as the exec's exit code.
func TestExecStream(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-exec-stream")
	id := startContainer(t, n, pod, podCfg, containerConfig("sleeps", "sleep", "600"))
	var stdout, stderr bytes.Buffer
	u := execURL(t, n, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{workload, "cat"}, Stdin: true, Stdout: true, Stderr: true})
	err := streamAll(t, executor(t, u), remotecommand.StreamOptions{
		Stdin: strings.NewReader("line one\nline two\n"), Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || stdout.String() != "line one\nline two\n" || stderr.Len() != 0 {
		t.Fatalf("exec cat: stdout %q, stderr %q, %v; want stdin back on stdout", stdout.String(), stderr.String(), err)
	}

	stdout.Reset()
	stderr.Reset()
	u = execURL(t, n, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{workload, "stderr", "to stderr"}, Stdout: true, Stderr: true})
	err = streamAll(t, executor(t, u), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil || stderr.String() != "to stderr\n" || stdout.Len() != 0 {
		t.Fatalf("exec stderr: stdout %q, stderr %q, %v; want the line on stderr only", stdout.String(), stderr.String(), err)
	}

	stdout.Reset()
	stderr.Reset()
	u = execURL(t, n, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{workload, "exit", "7"}, Stdout: true, Stderr: true})
	err = streamAll(t, executor(t, u), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var code exec.CodeExitError
	if !errors.As(err, &code) || code.Code != 7 {
		t.Fatalf("exec exit 7: %v (%T); want a CodeExitError with code 7", err, err)
	}
}

// sizeQueue is a TerminalSizeQueue fed by the test: each size sent is a resize the client
// sends; closing it ends the queue.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// lines reads a stream's output line by line, for a test that waits for a line.
type lines struct {
	t    *testing.T
	c    chan string
	seen []string
}

func newLines(t *testing.T, r io.Reader) *lines {
	l := &lines{t: t, c: make(chan string, 64)}
	go func() {
		defer close(l.c)
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.c <- strings.TrimRight(s.Text(), "\r")
		}
	}()
	return l
}

// wait reads lines until one equals want (a TTY's output also carries the echo of its input).
func (l *lines) wait(want string) {
	l.t.Helper()
	deadline := time.After(rpcTimeout)
	for {
		select {
		case line, ok := <-l.c:
			if !ok {
				l.t.Fatalf("output ended without %q; it was %q", want, l.seen)
			}
			l.seen = append(l.seen, line)
			if line == want {
				return
			}
		case <-deadline:
			l.t.Fatalf("no %q after %s; output so far %q", want, rpcTimeout, l.seen)
		}
	}
}

// TestExecStreamTTY runs streaming execs with a TTY, as `kubectl exec -it` does: the process has
// a console, its stdout and stderr come back merged on one stream, and a resize of the client's
// terminal reaches it (containerd → the shim's ResizePty → HCS's ConsoleSize modify of the
// process).
func TestExecStreamTTY(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-exec-tty")
	id := startContainer(t, n, pod, podCfg, containerConfig("sleeps", "sleep", "600"))
	// stderr with a TTY: the line comes back on stdout (a console has one output).
	var stdout bytes.Buffer
	u := execURL(t, n, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{workload, "stderr", "to the console"}, Tty: true, Stdout: true})
	if err := streamAll(t, executor(t, u), remotecommand.StreamOptions{Stdout: &stdout, Tty: true}); err != nil {
		t.Fatalf("exec stderr with a TTY: %v", err)
	}
	if got := strings.TrimSpace(stdout.String()); got != "to the console" {
		t.Fatalf("exec stderr with a TTY: stdout %q; want the stderr line", stdout.String())
	}

	// Resizes: the first size the queue gives is the terminal's at the start, then
	// each change; the workload prints the console size whenever it changes.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sizes := make(sizeQueue, 2)
	sizes <- remotecommand.TerminalSize{Width: 100, Height: 30}
	u = execURL(t, n, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{workload, "tty", "watch"}, Tty: true, Stdin: true, Stdout: true})
	e := executor(t, u)
	done := make(chan error, 1)
	go func() {
		done <- streamAll(t, e, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Tty: true, TerminalSizeQueue: sizes})
		outW.Close()
	}()
	out := newLines(t, outR)
	out.wait("tty")
	out.wait("size 30 100")
	sizes <- remotecommand.TerminalSize{Width: 132, Height: 43}
	out.wait("size 43 132")
	if _, err := io.WriteString(inW, "exit\r"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("exec tty watch: %v; output %q", err, out.seen)
	}
	close(sizes)
	inW.Close()
}

// TestAttach attaches to a container started with stdin and a TTY, as `kubectl attach -it`
// does: a resize through the attach reaches its console, its output comes back, and what is
// typed reaches it (the line "exit" ends it, with its exit code 0).
func TestAttach(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-attach")
	cfg := containerConfig("interactive", "tty", "watch")
	cfg.Stdin, cfg.Tty = true, true
	id := startContainer(t, n, pod, podCfg, cfg)
	// The container's first output, before anyone attaches, is in its CRI log.
	waitLog(t, filepath.Join(podCfg.LogDirectory, cfg.LogPath), " stdout F tty")

	resp, err := n.rt.Attach(ctx(t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Tty: true})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sizes := make(sizeQueue, 2)
	sizes <- remotecommand.TerminalSize{Width: 90, Height: 33}
	e := executor(t, resp.GetUrl())
	done := make(chan error, 1)
	go func() {
		done <- streamAll(t, e, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Tty: true, TerminalSizeQueue: sizes})
		outW.Close()
	}()
	out := newLines(t, outR)
	out.wait("size 33 90")
	sizes <- remotecommand.TerminalSize{Width: 101, Height: 27}
	out.wait("size 27 101")
	if _, err := io.WriteString(inW, "exit\r"); err != nil {
		t.Fatal(err)
	}
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("attached container after the typed exit: exit code %d, reason %q; want 0", s.GetExitCode(), s.GetReason())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach: %v; output %q", err, out.seen)
		}
	case <-time.After(rpcTimeout):
		t.Fatalf("the attach did not end after the container exited; output %q", out.seen)
	}
	close(sizes)
	inW.Close()
}

// TestAttachStdin attaches to a container started with stdin and no TTY, its stdin closed when
// the first attach ends (StdinOnce, as `kubectl run -i` makes it): a line typed comes back from
// it on stdout, and the end of the client's input ends it.
func TestAttachStdin(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-attach-stdin")
	cfg := containerConfig("cat", "cat")
	cfg.Stdin, cfg.StdinOnce = true, true
	id := startContainer(t, n, pod, podCfg, cfg)

	resp, err := n.rt.Attach(ctx(t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	e := executor(t, resp.GetUrl())
	done := make(chan error, 1)
	go func() {
		done <- streamAll(t, e, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: &stderr})
		outW.Close()
	}()
	out := newLines(t, outR)
	if _, err := io.WriteString(inW, "typed into the attach\n"); err != nil {
		t.Fatal(err)
	}
	out.wait("typed into the attach")
	inW.Close()
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("container after its stdin ended: exit code %d, reason %q; want 0", s.GetExitCode(), s.GetReason())
	}
	select {
	case err := <-done:
		if err != nil || stderr.Len() != 0 {
			t.Fatalf("attach: %v, stderr %q", err, stderr.String())
		}
	case <-time.After(rpcTimeout):
		t.Fatalf("the attach did not end after the container exited; output %q", out.seen)
	}
}
