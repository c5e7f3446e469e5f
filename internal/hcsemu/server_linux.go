package hcsemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Server serves an Engine to clients, one connection per client process: on a unix socket
// (Serve), where a process's stdio travels as descriptors, and on loopback TCP (ServeTCP),
// where it travels over stdio connections named by a token (tcp_linux.go). Both serve the same
// requests with the same handler. Requests on a connection run concurrently; responses and
// events go out through one queue per connection that never blocks the engine.
type Server struct {
	e *Engine
	// stdio holds the streams of processes created on TCP connections until their
	// AttachStdio connections take them.
	stdio *stdioTable
}

// NewServer returns a server of e.
func NewServer(e *Engine) *Server {
	return &Server{e: e, stdio: newStdioTable(AttachTimeout)}
}

// Listen creates the socket at address: its folder is created, and a socket file nobody
// answers on (left by a daemon that died) is removed. A socket somebody answers on is an
// error, so two daemons never share an address.
func Listen(address string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(address), 0o755); err != nil {
		return nil, fmt.Errorf("create the folder of %s: %w", address, err)
	}
	if _, err := os.Lstat(address); err == nil {
		c, err := net.DialTimeout("unix", address, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("another HCS emulator is already listening at %s", address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", address, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: address, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen at %s: %w", address, err)
	}
	// Only root talks to HCS, as only administrators may call vmcompute.
	if err := os.Chmod(address, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts unix connections until ln is closed, then closes them all and returns.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	return s.serve(ctx, func() (net.Conn, error) { return ln.AcceptUnix() }, func(ctx context.Context, _ *group, nc net.Conn) {
		s.runConn(ctx, &unixTransport{wc: wire.NewConn(nc.(*net.UnixConn))}, nil)
	})
}

// serve accepts connections until accept fails for good, handing each to handle on a
// goroutine of its own; then it closes every connection it accepted (and whatever their
// handlers tracked in the group) and waits for the handlers to return.
func (s *Server) serve(ctx context.Context, accept func() (net.Conn, error), handle func(context.Context, *group, net.Conn)) error {
	g := &group{closers: map[io.Closer]struct{}{}}
	defer g.closeAndWait()
	// A connection is not cancelled with ctx: it ends when its client goes or this loop ends.
	cctx := log.WithLogger(context.WithoutCancel(ctx), log.G(ctx))
	for {
		nc, err := accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		untrack := g.track(nc)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer untrack()
			handle(cctx, g, nc)
		}()
	}
}

// group is what one serve loop accepted: connections and the files their handlers relay,
// closed together when the loop ends so that no handler outlives it.
type group struct {
	wg sync.WaitGroup

	mu      sync.Mutex
	closers map[io.Closer]struct{}
	closed  bool
}

// track adds c to the things closed at the end of the loop (at once if it has ended); untrack
// removes it again, for a c its owner closes itself.
func (g *group) track(c io.Closer) (untrack func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		c.Close()
		return func() {}
	}
	g.closers[c] = struct{}{}
	return func() {
		g.mu.Lock()
		delete(g.closers, c)
		g.mu.Unlock()
	}
}

func (g *group) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	for c := range g.closers {
		c.Close()
	}
	g.closers = nil
	g.mu.Unlock()
	g.wg.Wait()
}

// transport carries one connection's frames: a unix socket with descriptors, or a byte stream
// on which files cannot travel.
type transport interface {
	// receive returns the client's next frame (clients send no descriptors).
	receive() (*wire.Frame, error)
	// send writes a frame with files attached; the caller closes the files afterwards. Only
	// one goroutine sends.
	send(f *wire.Frame, files []*os.File) error
	// close ends the connection; a receive under way fails. Safe to call more than once.
	close() error
}

// unixTransport is a connection on the unix socket: files travel as SCM_RIGHTS.
type unixTransport struct {
	wc *wire.Conn
}

func (t *unixTransport) receive() (*wire.Frame, error) {
	f, fds, err := t.wc.Receive()
	for _, fd := range fds {
		syscall.Close(fd) // clients send none
	}
	return f, err
}

func (t *unixTransport) send(f *wire.Frame, files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return t.wc.Send(f, fds...)
}

func (t *unixTransport) close() error { return t.wc.Close() }

// conn is one client connection; it is the engine's Subscriber for the handles it holds.
type conn struct {
	srv    *Server
	t      transport
	ctx    context.Context
	cancel context.CancelFunc
	// stdio, on a transport that cannot carry files, is where a response's files wait for
	// their AttachStdio connections; the response carries their token instead.
	stdio *stdioTable

	handlers sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []outFrame
	closed bool
	reqs   map[uint64]context.CancelFunc
}

type outFrame struct {
	f     *wire.Frame
	files []*os.File // sent with the frame, then closed
}

// runConn serves one connection until it ends, then releases the handles it held.
func (s *Server) runConn(ctx context.Context, t transport, stdio *stdioTable) {
	c := &conn{srv: s, t: t, stdio: stdio, reqs: map[uint64]context.CancelFunc{}}
	c.cond = sync.NewCond(&c.mu)
	c.ctx, c.cancel = context.WithCancel(ctx)
	written := make(chan struct{})
	go func() {
		defer close(written)
		c.writeLoop()
	}()
	c.readLoop()
	<-written
}

// Notify implements Subscriber.
func (c *conn) Notify(ev wire.Event) {
	c.enqueue(&wire.Frame{Event: &ev}, nil)
}

func (c *conn) enqueue(f *wire.Frame, files []*os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		for _, f := range files {
			f.Close()
		}
		return
	}
	c.queue = append(c.queue, outFrame{f: f, files: files})
	c.cond.Signal()
}

func (c *conn) writeLoop() {
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			for _, o := range c.queue {
				for _, f := range o.files {
					f.Close()
				}
			}
			c.queue = nil
			c.mu.Unlock()
			return
		}
		o := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		err := c.t.send(o.f, o.files)
		for _, f := range o.files {
			f.Close()
		}
		if err != nil {
			log.G(c.ctx).WithError(err).Debug("hcsemu: write to client failed")
			c.t.close() // the reader ends and cleans up
		}
	}
}

func (c *conn) readLoop() {
	for {
		f, err := c.t.receive()
		if err != nil {
			break
		}
		if f.Method == wire.MethodCancel {
			var a wire.CancelArgs
			if err := f.DecodeArgs(&a); err == nil {
				c.mu.Lock()
				if cancel, ok := c.reqs[a.Request]; ok {
					cancel()
				}
				c.mu.Unlock()
			}
			c.enqueue(&wire.Frame{ID: f.ID}, nil)
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		c.mu.Lock()
		c.reqs[f.ID] = cancel
		c.mu.Unlock()
		c.handlers.Add(1)
		go func() {
			defer c.handlers.Done()
			out, files := c.handle(ctx, f)
			c.mu.Lock()
			delete(c.reqs, f.ID)
			c.mu.Unlock()
			cancel()
			c.enqueue(out, files)
		}()
	}
	// The client is gone: stop its requests, let them finish, then drop its handles.
	c.cancel()
	c.handlers.Wait()
	c.srv.e.Forget(c.ctx, c)
	c.mu.Lock()
	c.closed = true
	c.cond.Signal()
	c.mu.Unlock()
	c.t.close()
}

// handle runs one request and builds its response.
func (c *conn) handle(ctx context.Context, f *wire.Frame) (*wire.Frame, []*os.File) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("method", f.Method))
	var (
		result string
		reply  any
		files  []*os.File
		err    error
	)
	e := c.srv.e
	switch f.Method {
	case wire.MethodCreateComputeSystem:
		var a wire.CreateSystemArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = e.CreateSystem(ctx, a.ID, a.Configuration, c)
		}
	case wire.MethodOpenComputeSystem:
		var a wire.OpenSystemArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = e.OpenSystem(ctx, a.ID, c)
		}
	case wire.MethodCloseComputeSystem:
		var a wire.SystemArgs
		if err = f.DecodeArgs(&a); err == nil {
			e.CloseSystem(ctx, a.System, c)
		}
	case wire.MethodEnumerateComputeSystems:
		var a wire.QueryArgs
		if err = f.DecodeArgs(&a); err == nil {
			result, err = e.Enumerate(ctx, a.Query)
		}
	case wire.MethodStartComputeSystem, wire.MethodShutDownComputeSystem, wire.MethodTerminateComputeSystem,
		wire.MethodPauseComputeSystem, wire.MethodResumeComputeSystem, wire.MethodGetComputeSystemProperties,
		wire.MethodModifyComputeSystem:
		var a wire.SystemArgs
		if err = f.DecodeArgs(&a); err != nil {
			break
		}
		switch f.Method {
		case wire.MethodStartComputeSystem:
			err = e.Start(ctx, a.System, a.Document)
		case wire.MethodShutDownComputeSystem:
			err = e.Shutdown(ctx, a.System, a.Document)
		case wire.MethodTerminateComputeSystem:
			err = e.Terminate(ctx, a.System, a.Document)
		case wire.MethodPauseComputeSystem:
			err = e.Pause(ctx, a.System, a.Document)
		case wire.MethodResumeComputeSystem:
			err = e.Resume(ctx, a.System, a.Document)
		case wire.MethodGetComputeSystemProperties:
			result, err = e.Properties(ctx, a.System, a.Document)
		case wire.MethodModifyComputeSystem:
			err = e.Modify(ctx, a.System, a.Document)
		}
	case wire.MethodCreateProcess:
		var a wire.CreateProcessArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, files, err = e.CreateProcess(ctx, a.System, a.Parameters, c)
		}
	case wire.MethodOpenProcess:
		var a wire.ProcessRef // MethodOpenProcess's args name the process by system and pid
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = e.OpenProcess(ctx, a, c)
		}
	case wire.MethodCloseProcess, wire.MethodTerminateProcess, wire.MethodSignalProcess,
		wire.MethodGetProcessProperties, wire.MethodModifyProcess:
		var a wire.ProcessArgs
		if err = f.DecodeArgs(&a); err != nil {
			break
		}
		switch f.Method {
		case wire.MethodCloseProcess:
			e.CloseProcess(ctx, a.Process, c)
		case wire.MethodTerminateProcess:
			err = e.TerminateProcess(ctx, a.Process, a.Document)
		case wire.MethodSignalProcess:
			err = e.SignalProcess(ctx, a.Process, a.Document)
		case wire.MethodGetProcessProperties:
			result, err = e.ProcessProperties(ctx, a.Process, a.Document)
		case wire.MethodModifyProcess:
			err = e.ModifyProcess(ctx, a.Process, a.Document)
		}
	case wire.MethodGetServiceProperties:
		var a wire.QueryArgs
		if err = f.DecodeArgs(&a); err == nil {
			result, err = e.ServiceProperties(ctx, a.Query)
		}
	default:
		var ok bool
		if reply, ok, err = c.handleStorage(ctx, f); !ok {
			err = errorf(computecore.HCS_E_UNKNOWN_MESSAGE, "unknown method %q", f.Method)
		}
	}
	out := &wire.Frame{ID: f.ID}
	if err != nil {
		he := AsError(err)
		if isProtocolError(err) {
			he.HResult = computecore.HCS_E_PROTOCOL_ERROR // args this server cannot read
		}
		log.G(ctx).WithError(err).Debug("hcsemu: request failed")
		out.HResult = uint32(he.HResult)
		out.Result = resultError(he)
		for _, f := range files {
			f.Close()
		}
		return out, nil
	}
	out.Result = result
	if len(files) > 0 && c.stdio != nil {
		// This transport cannot carry the files: they wait under a token for the client's
		// AttachStdio connections, and the reply names the token instead.
		pr, ok := reply.(wire.ProcessReply)
		if !ok {
			for _, f := range files {
				f.Close()
			}
			he := &Error{HResult: computecore.E_FAIL, Message: fmt.Sprintf("%s: a reply of type %T cannot carry stdio", f.Method, reply)}
			out.HResult, out.Result = uint32(he.HResult), resultError(he)
			return out, nil
		}
		token, terr := c.stdio.add(ctx, pr, files)
		if terr != nil {
			he := AsError(terr)
			out.HResult, out.Result = uint32(he.HResult), resultError(he)
			return out, nil
		}
		pr.StdioToken = token
		reply, files = pr, nil
	}
	if reply != nil {
		b, merr := json.Marshal(reply)
		if merr != nil {
			out.HResult = uint32(computecore.E_FAIL)
			out.Result = resultError(&Error{HResult: computecore.E_FAIL, Message: merr.Error()})
			return out, nil
		}
		out.Reply = b
	}
	return out, files
}

// isProtocolError reports an error that is not the engine's: args that could not be decoded.
func isProtocolError(err error) bool {
	var e *Error
	var hr computecore.HRESULT
	return !errors.As(err, &e) && !errors.As(err, &hr)
}

// resultError is HCS's ResultError document for a failure.
func resultError(e *Error) string {
	b, _ := json.Marshal(schema2.ResultError{
		Error:        int32(uint32(e.HResult)),
		ErrorMessage: e.Message,
		ErrorEvents:  []schema2.ErrorEvent{{Message: e.Message, Source: "hcsemu"}},
	})
	return string(b)
}

// Run is the daemon: an engine served at addrs until ctx is done, then every system is
// terminated and the socket (and the TCP address file) removed.
func Run(ctx context.Context, cfg Config, addrs Addresses) error {
	if err := addrs.validate(); err != nil {
		return err
	}
	// The socket first: a second daemon on the same address stops here, before its engine
	// touches anything.
	ln, err := Listen(addrs.Unix)
	if err != nil {
		return err
	}
	var tln net.Listener
	if addrs.TCP != "" {
		if tln, err = ListenTCP(addrs.TCP); err != nil {
			ln.Close()
			return err
		}
	}
	closeListeners := func() {
		ln.Close()
		if tln != nil {
			tln.Close()
		}
	}
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		closeListeners()
		return err
	}
	fields := log.Fields{"address": addrs.Unix, "root": e.cfg.Root, "osVersion": e.cfg.OSVersion}
	if tln != nil {
		fields["tcpAddress"] = tln.Addr().String()
	}
	srv := NewServer(e)
	serving := 1
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	if tln != nil {
		serving++
		go func() { done <- srv.ServeTCP(ctx, tln) }()
	}
	// The address file last: it tells whoever waits for it that the daemon is ready.
	if addrs.TCPFile != "" {
		err = writeFileAtomic(addrs.TCPFile, tln.Addr().String())
	}
	if err == nil {
		log.G(ctx).WithFields(fields).Info("hcsemu: serving")
		select {
		case <-ctx.Done():
		case err = <-done:
			serving--
		}
	}
	closeListeners()
	for ; serving > 0; serving-- {
		err = errors.Join(err, <-done)
	}
	srv.stdio.close()
	log.G(ctx).Info("hcsemu: shutting down: terminating every compute system")
	cerr := e.Close(context.WithoutCancel(ctx))
	os.Remove(addrs.Unix)
	if addrs.TCPFile != "" {
		os.Remove(addrs.TCPFile)
	}
	return errors.Join(err, cerr)
}

// writeFileAtomic writes content to path through a temporary file and a rename, so that a
// reader never sees it half written.
func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("--tcp-address-file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--tcp-address-file: %w", err)
	}
	return nil
}
