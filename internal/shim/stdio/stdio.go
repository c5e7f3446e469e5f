package stdio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// Config is what containerd sent in a Create or Exec request.
type Config struct {
	Stdin, Stdout, Stderr string
	Terminal              bool
}

// Upstream is containerd's side of a process's stdio. Any stream may be nil.
type Upstream struct {
	Stdin          io.ReadCloser
	Stdout, Stderr io.WriteCloser

	closers []func() error // extra cleanup (a logging binary), run after the streams close
}

// Close closes every stream and releases a logging binary. It is safe to call more than once.
func (u *Upstream) Close() error {
	var errs []error
	if u.Stdin != nil {
		errs = append(errs, u.Stdin.Close())
	}
	return errors.Join(append(errs, u.closeOutputs())...)
}

// closeOutputs closes stdout and stderr, then releases a logging binary.
func (u *Upstream) closeOutputs() error {
	var errs []error
	if u.Stdout != nil {
		errs = append(errs, u.Stdout.Close())
	}
	if u.Stderr != nil && u.Stderr != u.Stdout {
		errs = append(errs, u.Stderr.Close())
	}
	for _, c := range u.closers {
		errs = append(errs, c())
	}
	u.closers = nil
	return errors.Join(errs...)
}

// Schemes of the log URIs containerd's clients send (containerd cio.LogURI / cio.BinaryIO).
const (
	schemeFile     = "file"
	schemeBinary   = "binary"
	schemeBinaryV2 = "binary-v2"
)

// Open opens containerd's side of the streams for the process id in namespace ns. A stdout
// that is a file:// or binary:// URI receives stderr too (containerd sends the same URI for
// both, and runc's shim does the same).
func Open(ctx context.Context, ns, id string, c Config) (_ *Upstream, retErr error) {
	u := &Upstream{}
	defer func() {
		if retErr != nil {
			_ = u.Close()
		}
	}()
	for _, s := range []struct{ name, uri string }{{"stdin", c.Stdin}, {"stdout", c.Stdout}, {"stderr", c.Stderr}} {
		if isStreaming(s.uri) {
			return nil, fmt.Errorf("%s %q: streaming I/O (CRI runtime io_type = \"streaming\") is not supported; use io_type = \"fifo\": %w",
				s.name, s.uri, errdefs.ErrNotImplemented)
		}
	}
	if scheme, uri, ok := logURI(c.Stdout); ok {
		switch scheme {
		case schemeFile:
			f, err := openLogFile(uri)
			if err != nil {
				return nil, err
			}
			u.Stdout, u.Stderr = f, f
		case schemeBinary, schemeBinaryV2:
			if err := openBinary(ctx, ns, id, uri, u); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("stdout %q: unsupported scheme %q: %w", c.Stdout, scheme, errdefs.ErrInvalidArgument)
		}
		if c.Stdin != "" {
			in, err := openPipe(ctx, c.Stdin, false)
			if err != nil {
				return nil, fmt.Errorf("stdin %q: %w", c.Stdin, err)
			}
			u.Stdin = in.(io.ReadCloser)
		}
		return u, nil
	}
	if c.Stdin != "" {
		in, err := openPipe(ctx, c.Stdin, false)
		if err != nil {
			return nil, fmt.Errorf("stdin %q: %w", c.Stdin, err)
		}
		u.Stdin = in.(io.ReadCloser)
	}
	if c.Stdout != "" {
		out, err := openPipe(ctx, c.Stdout, true)
		if err != nil {
			return nil, fmt.Errorf("stdout %q: %w", c.Stdout, err)
		}
		u.Stdout = out.(io.WriteCloser)
	}
	// A terminal has one output stream; containerd still names a stderr FIFO then, which
	// stays unused (as with runc).
	if c.Stderr != "" && !c.Terminal {
		errw, err := openPipe(ctx, c.Stderr, true)
		if err != nil {
			return nil, fmt.Errorf("stderr %q: %w", c.Stderr, err)
		}
		u.Stderr = errw.(io.WriteCloser)
	}
	return u, nil
}

// isStreaming reports whether s is a URI of containerd 2.x's streaming I/O, which CRI sends for
// a runtime with io_type = "streaming": <ttrpc|grpc>+<transport>://…?streaming_id=…
// (internal/cri/io/streaming.go; the path may be a named pipe's, which url.Parse refuses). The
// shim serves no streaming API.
func isStreaming(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	return ok && (strings.HasPrefix(scheme, "ttrpc+") || strings.HasPrefix(scheme, "grpc+"))
}

// logURI reports whether s is a URI with a scheme (file://, binary://) rather than a FIFO or
// pipe path. Windows pipe paths (\\.\pipe\...) and absolute paths have no scheme.
func logURI(s string) (string, *url.URL, bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", nil, false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", nil, false
	}
	return u.Scheme, u, true
}

// openLogFile opens (appending, creating it and its folder) the file a file:// URI names.
func openLogFile(u *url.URL) (*os.File, error) {
	p, err := logFilePath(u)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("log file %q (from %q): %w", p, u.String(), err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file %q (from %q): %w", p, u.String(), err)
	}
	return f, nil
}

// logFilePath is the local, absolute path a file:// URI names. A host other than "localhost"
// would be another machine's file (RFC 8089 section 2), which the shim cannot write; a
// relative path would depend on the shim's working directory. containerd's clients send
// neither: cio.LogURIGenerator requires an absolute path and sets no host.
func logFilePath(u *url.URL) (string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("file URI %q names host %q: only local files are supported: %w", u.String(), u.Host, errdefs.ErrInvalidArgument)
	}
	if u.Path == "" {
		return "", fmt.Errorf("file URI %q has no path: %w", u.String(), errdefs.ErrInvalidArgument)
	}
	p := localPath(u.Path)
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("file URI %q: path %q is not absolute: %w", u.String(), p, errdefs.ErrInvalidArgument)
	}
	return p, nil
}

// Process is the process's side of the streams, as HCS hands them out. Any may be nil.
type Process struct {
	Stdin          io.WriteCloser
	Stdout, Stderr io.ReadCloser
}

// Relay copies between an Upstream and a Process.
type Relay struct {
	up        *Upstream
	proc      Process
	output    sync.WaitGroup
	drained   chan struct{}
	stdinDone chan struct{} // closed when the stdin copy ended (or there is none)
	stdinOnce sync.Once
	closeOnce sync.Once
}

// NewRelay starts copying: upstream stdin → process stdin (closing the process's stdin at
// EOF, so `cat` sees end of input), process stdout/stderr → upstream. Drained is closed once
// both outputs reached EOF and their upstream streams were closed.
func NewRelay(ctx context.Context, up *Upstream, proc Process) *Relay {
	r := &Relay{up: up, proc: proc, drained: make(chan struct{}), stdinDone: make(chan struct{})}
	if up.Stdin != nil && proc.Stdin != nil {
		go func() {
			defer close(r.stdinDone)
			_, err := io.Copy(proc.Stdin, up.Stdin)
			if err != nil && !isClosed(err) {
				log.G(ctx).WithError(err).Debug("stdin relay stopped")
			}
			r.CloseStdin()
		}()
	} else {
		close(r.stdinDone)
		if proc.Stdin != nil {
			// Nobody will ever write: give the process EOF at once.
			r.CloseStdin()
		}
	}
	copyOut := func(name string, dst io.WriteCloser, src io.ReadCloser) {
		if src == nil {
			return
		}
		r.output.Add(1)
		go func() {
			defer r.output.Done()
			w := dst
			if w == nil {
				w = nopWriteCloser{io.Discard}
			}
			if _, err := io.Copy(w, src); err != nil && !isClosed(err) {
				log.G(ctx).WithError(err).WithField("stream", name).Warn("output relay stopped")
			}
			_ = src.Close()
		}()
	}
	copyOut("stdout", up.Stdout, proc.Stdout)
	copyOut("stderr", up.Stderr, proc.Stderr)
	go func() {
		r.output.Wait()
		r.closeUpstream()
		close(r.drained)
	}()
	return r
}

// Drained is closed when all output was delivered and containerd's streams were closed.
func (r *Relay) Drained() <-chan struct{} { return r.drained }

// CloseStdin closes the process's stdin (CloseIO). Idempotent.
func (r *Relay) CloseStdin() {
	r.stdinOnce.Do(func() {
		if r.proc.Stdin != nil {
			_ = r.proc.Stdin.Close()
		}
	})
}

// CloseIO is containerd's CloseIO: the client has finished writing stdin. The copy is given
// grace to deliver what the client wrote before closing (the client closes its end of the
// FIFO right before calling CloseIO, so the copy normally ends by itself at EOF); then the
// process's stdin is closed.
func (r *Relay) CloseIO(grace time.Duration) {
	select {
	case <-r.stdinDone:
	case <-time.After(grace):
		if r.up.Stdin != nil {
			_ = r.up.Stdin.Close()
		}
	}
	r.CloseStdin()
}

// Abort stops the relay without waiting for EOF: used when a process exited but something
// still holds its output open beyond the drain timeout.
func (r *Relay) Abort() {
	if r.proc.Stdout != nil {
		_ = r.proc.Stdout.Close()
	}
	if r.proc.Stderr != nil {
		_ = r.proc.Stderr.Close()
	}
	r.CloseStdin()
}

func (r *Relay) closeUpstream() {
	r.closeOnce.Do(func() {
		// Stdin stays open: the process may still read after its output ended (or it has no
		// output at all); Close ends it.
		_ = r.up.closeOutputs()
	})
}

// Close ends the relay after the process exited: containerd's stdin is closed (unblocking the
// stdin copy), and so is the process's.
func (r *Relay) Close() {
	if r.up.Stdin != nil {
		_ = r.up.Stdin.Close()
	}
	r.CloseStdin()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// isClosed reports whether err only says a stream ended. A console (a pty under the emulator)
// reports its end as EIO once the other side closed.
func isClosed(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EIO) ||
		strings.Contains(err.Error(), "use of closed")
}
