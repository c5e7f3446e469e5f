package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The TCP transport (package wire's doc, hack/wine/README.md): the same frames and requests as
// the unix socket, for the stand-in computecore.dll that Windows programs load under Wine,
// which cannot receive descriptors. Every connection authenticates first (gate_linux.go). A process's stdio waits in the server's stdioTable under a
// token the reply carries, until the client opens one connection per stream whose first frame
// after the authentication is AttachStdio; from then on that connection is the stream's bytes.

// AttachTimeout is how long a TCP client has to attach a process's streams before the daemon
// closes them, so that a client that never attaches does not hold a process's pipes forever.
const AttachTimeout = 30 * time.Second

// ListenTCP listens on a loopback TCP address (see ValidateTCPAddress).
func ListenTCP(address string) (net.Listener, error) {
	if err := ValidateTCPAddress(address); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("--tcp-address %q: %w", address, err)
	}
	return ln, nil
}

// ServeTCP accepts TCP connections until ln is closed, then closes them all (and the streams
// they relay) and returns. Every connection first authenticates with key (the content of the
// daemon's --tcp-key-file; gate_linux.go), or is refused. After that, a connection whose next
// frame is AttachStdio carries one stream of a process; any other is a client's control
// connection, served as a unix one is, except that a reply's stdio is kept under a token
// instead of sent.
func (s *Server) ServeTCP(ctx context.Context, ln net.Listener, key string) error {
	if key == "" {
		return errors.New("serve TCP: no key: every TCP connection must authenticate (--tcp-key-file)")
	}
	return s.serve(ctx, ln.Accept, key, s.serveTCPConn)
}

func (s *Server) serveTCPConn(ctx context.Context, g *group, nc net.Conn) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("remote", nc.RemoteAddr().String()))
	r := bufio.NewReaderSize(nc, 64<<10)
	first, err := wire.ReadFrame(r)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			log.G(ctx).WithError(err).Warn("hcsemu: TCP connection: first frame after authentication")
		}
		nc.Close()
		return
	}
	switch first.Method {
	case wire.MethodAttachStdio:
		s.attach(ctx, g, nc, r, first)
		return
	case wire.MethodAttachPipe:
		s.attachPipe(ctx, g, nc, r, first)
		return
	}
	s.runConn(ctx, &tcpTransport{nc: nc, r: r, first: first}, s.stdio)
}

// tcpTransport is a control connection on TCP. Only the connection's writeLoop sends.
type tcpTransport struct {
	nc    net.Conn
	r     *bufio.Reader
	first *wire.Frame // read to tell the connection's kind; received first
}

func (t *tcpTransport) receive() (*wire.Frame, error) {
	if f := t.first; f != nil {
		t.first = nil
		return f, nil
	}
	return wire.ReadFrame(t.r)
}

func (t *tcpTransport) send(f *wire.Frame, files []*os.File) error {
	if len(files) > 0 {
		// conn.handle gives a TCP connection's files to the stdio table; none may reach here.
		return fmt.Errorf("frame %d: %d files cannot travel on TCP", f.ID, len(files))
	}
	return wire.WriteFrame(t.nc, f)
}

func (t *tcpTransport) close() error { return t.nc.Close() }

// attach relays one stream between its AttachStdio connection and the process: stdin from the
// connection until the client's half-close, which then ends the process's input; stdout or
// stderr to the connection until the process's end of file, when the connection is closed.
func (s *Server) attach(ctx context.Context, g *group, nc net.Conn, r *bufio.Reader, f *wire.Frame) {
	defer nc.Close()
	var a wire.AttachStdioArgs
	if err := f.DecodeArgs(&a); err != nil {
		log.G(ctx).WithError(err).Warn("hcsemu: AttachStdio")
		return
	}
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("slot", a.Slot))
	file := s.stdio.take(a.Token, a.Slot)
	if file == nil {
		log.G(ctx).Warn("hcsemu: AttachStdio of an unknown, expired or already attached stream")
		return
	}
	// At shutdown, closing the file ends a relay that waits on a process that still runs.
	untrack := g.track(file)
	defer untrack()
	defer file.Close()
	var err error
	if a.Slot == wire.StdIn {
		// r first: the client may have sent input right behind its AttachStdio frame.
		_, err = io.Copy(file, r)
	} else {
		_, err = io.Copy(nc, file)
	}
	// EIO: a pseudo console's master reads EIO once the process side has closed.
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EIO) {
		log.G(ctx).WithError(err).Debug("hcsemu: stdio stream ended")
	}
}

// stdioTable keeps the streams of processes created on TCP connections, by token and slot,
// until an AttachStdio connection takes each or its token expires.
type stdioTable struct {
	timeout time.Duration

	mu      sync.Mutex
	streams map[streamKey]*os.File
	timers  map[string]*time.Timer // by token, while any of its streams waits
	closed  bool
}

type streamKey struct {
	token string
	slot  int
}

func newStdioTable(timeout time.Duration) *stdioTable {
	return &stdioTable{timeout: timeout, streams: map[streamKey]*os.File{}, timers: map[string]*time.Timer{}}
}

// add takes ownership of a reply's files, in the order the unix transport sends them (the
// streams whose pr.Stdio entry is true, in slot order; with pr.Console, one pseudo console
// master that serves slots 0 and 1), and keeps them under a new token, which it returns.
func (t *stdioTable) add(ctx context.Context, pr wire.ProcessReply, files []*os.File) (string, error) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var slots [3]*os.File
	release := func() {
		for _, f := range slots {
			if f != nil {
				f.Close()
			}
		}
	}
	fail := func(format string, args ...any) (string, error) {
		release()
		return "", hresult.Errorf(computecore.E_FAIL, "stdio of process %d: "+format, append([]any{pr.PID}, args...)...)
	}
	var from [3]*os.File // each slot's file among files
	if pr.Console {
		if len(files) != 1 {
			return fail("a pseudo console comes as 1 file, not %d", len(files))
		}
		from[wire.StdIn], from[wire.StdOut] = files[0], files[0]
	} else {
		i := 0
		for slot, ok := range pr.Stdio {
			if ok && i < len(files) {
				from[slot] = files[i]
				i++
			}
		}
		if i != len(files) {
			return fail("%d files for the streams %v", len(files), pr.Stdio)
		}
	}
	for slot, f := range from {
		if f == nil {
			continue
		}
		// Each slot gets a descriptor of its own, so that the end of one stream (stdin's
		// half-close) closes only that stream's descriptor, as with the unix client's two
		// console descriptors.
		var err error
		if slots[slot], err = pollableDup(f); err != nil {
			return fail("slot %d: %v", slot, err)
		}
	}
	token := rand.Text() // 128 random bits: unguessable, as the protocol requires
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fail("the server is shutting down")
	}
	for slot, f := range slots {
		if f != nil {
			t.streams[streamKey{token, slot}] = f
		}
	}
	t.timers[token] = time.AfterFunc(t.timeout, func() { t.expire(ctx, token, pr.PID) })
	return token, nil
}

// take hands over a stream to its AttachStdio connection: once, and only before it expires.
func (t *stdioTable) take(token string, slot int) *os.File {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := streamKey{token, slot}
	f, ok := t.streams[k]
	if !ok {
		return nil
	}
	delete(t.streams, k)
	if timer, ok := t.timers[token]; ok && !t.waitingLocked(token) {
		timer.Stop()
		delete(t.timers, token)
	}
	return f
}

func (t *stdioTable) waitingLocked(token string) bool {
	for slot := range 3 {
		if _, ok := t.streams[streamKey{token, slot}]; ok {
			return true
		}
	}
	return false
}

// expire closes a token's streams that nobody attached: the process then reads the end of its
// input, or fails to write its output, as if the client had closed its pipe ends.
func (t *stdioTable) expire(ctx context.Context, token string, pid uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.timers, token)
	for slot := range 3 {
		k := streamKey{token, slot}
		if f, ok := t.streams[k]; ok {
			log.G(ctx).WithFields(log.Fields{"pid": pid, "slot": slot}).Warnf("hcsemu: stdio stream not attached within %s; closed", t.timeout)
			f.Close()
			delete(t.streams, k)
		}
	}
}

// close closes every stream still waiting, and refuses new ones.
func (t *stdioTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for token, timer := range t.timers {
		timer.Stop()
		delete(t.timers, token)
	}
	for k, f := range t.streams {
		f.Close()
		delete(t.streams, k)
	}
}

// pollableDup duplicates f into a non-blocking descriptor that Go's poller serves, so that
// closing it ends a relay's read or write under way (at shutdown). It does not call f.Fd,
// which would put f's open file description in blocking mode.
func pollableDup(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(sysfd uintptr) {
		fd, derr = unix.FcntlInt(sysfd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("duplicate %s: %w", f.Name(), derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make %s non-blocking: %w", f.Name(), err)
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// conn is the engine's dispatch.PipeRelayer: the compute engine finds a system's relayer among
// its holders by that interface, so a method missing here would fail only at run time.
var _ dispatch.PipeRelayer = (*conn)(nil)

// CanRelayPipes implements dispatch.PipeRelayer: a TCP client is the stand-in DLL, which runs
// under Wine beside the host's pipes; a unix client has no Windows side.
func (c *conn) CanRelayPipes() bool { return c.stdio != nil }

// RelayPipe implements dispatch.PipeRelayer: it keeps the container's connection under a new
// token and asks the client to open the host pipe and attach it (wire.PipeConnect).
func (c *conn) RelayPipe(ctx context.Context, sys wire.SystemRef, hostPipe string, nc net.Conn) error {
	if c.stdio == nil {
		return errors.New("a unix client cannot open host pipes")
	}
	token, err := c.srv.pipes.add(ctx, hostPipe, nc)
	if err != nil {
		return err
	}
	c.Notify(wire.Event{System: sys, Pipe: &wire.PipeConnect{HostPath: hostPipe, Token: token}})
	return nil
}

// pipeTable keeps the container side of mapped pipe connections by token until the client's
// AttachPipe connection takes it, or closes it when the token expires.
type pipeTable struct {
	timeout time.Duration

	mu     sync.Mutex
	conns  map[string]*pendingPipe
	closed bool
}

type pendingPipe struct {
	hostPipe string
	c        net.Conn
	timer    *time.Timer
}

func newPipeTable(timeout time.Duration) *pipeTable {
	return &pipeTable{timeout: timeout, conns: map[string]*pendingPipe{}}
}

func (t *pipeTable) add(ctx context.Context, hostPipe string, c net.Conn) (string, error) {
	token := rand.Text()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", errors.New("the server is shutting down")
	}
	p := &pendingPipe{hostPipe: hostPipe, c: c}
	p.timer = time.AfterFunc(t.timeout, func() {
		if p := t.take(token); p != nil {
			log.G(ctx).WithField("hostPipe", hostPipe).Warnf("hcsemu: mapped pipe not attached by the client within %s; the container's connection is closed", t.timeout)
			p.c.Close()
		}
	})
	t.conns[token] = p
	return token, nil
}

// take hands a pending connection to its AttachPipe connection, once.
func (t *pipeTable) take(token string) *pendingPipe {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.conns[token]
	if !ok {
		return nil
	}
	delete(t.conns, token)
	p.timer.Stop()
	return p
}

// close closes every connection still waiting, and refuses new ones.
func (t *pipeTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for token, p := range t.conns {
		p.timer.Stop()
		p.c.Close()
		delete(t.conns, token)
	}
}

// attachPipe relays a mapped pipe between the container's connection and the client's
// AttachPipe connection, both ways; each direction's end is passed on as a half-close, and the
// relay ends when both have ended.
func (s *Server) attachPipe(ctx context.Context, g *group, nc net.Conn, r *bufio.Reader, f *wire.Frame) {
	defer nc.Close()
	var a wire.AttachPipeArgs
	if err := f.DecodeArgs(&a); err != nil {
		log.G(ctx).WithError(err).Warn("hcsemu: AttachPipe")
		return
	}
	p := s.pipes.take(a.Token)
	if p == nil {
		log.G(ctx).Warn("hcsemu: AttachPipe of an unknown, expired or already attached pipe connection")
		return
	}
	defer p.c.Close()
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("hostPipe", p.hostPipe))
	if a.Error != 0 {
		// What a process of the container sees on Windows when the host pipe is not there
		// (or busy): its open fails. Here its connection closes at once.
		log.G(ctx).WithField("error", computecore.HRESULT(0x80070000|a.Error&0xffff).Error()).Warn("hcsemu: the client could not open the mapped host pipe; the container's connection is closed")
		return
	}
	untrack := g.track(p.c)
	defer untrack()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(nc, p.c)
		closeWrite(nc)
	}()
	// r first: the client may have sent the host pipe's first bytes right behind its frame.
	io.Copy(p.c, r)
	closeWrite(p.c)
	<-done
}

// closeWrite half-closes a connection that can be, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
