package server

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

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Engine is what the server needs of the services it serves (internal/hcsemu/compute's Engine,
// which composes every service's methods): the wire methods, the fault injector's hooks, and
// what a connection's end and its drive mapping mean to the handles and paths it gave.
type Engine interface {
	// Method returns the method that serves a wire method name.
	Method(name string) (dispatch.Method, bool)
	// BeforeRequest runs before every request the table serves: the injected faults (a
	// delay, a stall, a failure) apply here.
	BeforeRequest(ctx context.Context, method string) error
	// Track registers a served connection, which drop closes (FaultDisconnect); untrack
	// forgets it when the connection ends.
	Track(sub dispatch.Subscriber, drop func()) (untrack func())
	// Forget releases the handles a connection held, once it has ended.
	Forget(ctx context.Context, sub dispatch.Subscriber)
	// ClientPaths checks a connection's drive mapping (wire.MethodClientPaths) and returns
	// what gives it to each request the connection makes afterwards.
	ClientPaths(a wire.ClientPathsArgs) (with func(context.Context) context.Context, err error)
}

// Server serves an Engine to clients, one connection per client process: on a unix socket
// (Serve), where a process's stdio travels as descriptors, and on loopback TCP (ServeTCP),
// where it travels over stdio connections named by a token (tcp_linux.go). Both serve the same
// requests with the same handler. Requests on a connection run concurrently; responses and
// events go out through one queue per connection that never blocks the engine.
type Server struct {
	e Engine
	// stdio holds the streams of processes created on TCP connections until their
	// AttachStdio connections take them.
	stdio *stdioTable
	// pipes holds the container side of mapped pipe connections until the client's
	// AttachPipe connection takes each (tcp_linux.go).
	pipes *pipeTable
}

// NewServer returns a server of e.
func NewServer(e Engine) *Server {
	return &Server{e: e, stdio: newStdioTable(AttachTimeout), pipes: newPipeTable(AttachTimeout)}
}

// Close closes what the server still holds for clients that never came for it: the streams
// of processes and the mapped pipe connections waiting for their TCP attach. Call it once the
// serve loops have returned, before the engine closes.
func (s *Server) Close() {
	s.stdio.close()
	s.pipes.close()
}

// serve accepts connections until accept fails for good, handing each that the gate admits
// (admit, with tcpKey for byte-stream connections; gate_linux.go) to handle on a goroutine of
// its own; then it closes every connection it accepted (and whatever their handlers tracked in
// the group) and waits for the handlers to return. Every transport serves through here, so
// that none serves a connection the gate has not admitted.
func (s *Server) serve(ctx context.Context, accept func() (net.Conn, error), tcpKey string, handle func(context.Context, *group, net.Conn)) error {
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
			if err := admit(nc, tcpKey); err != nil {
				refuse(cctx, nc, err)
				return
			}
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

	// paths gives a request the client's drive mapping (wire.MethodClientPaths), nil until
	// it gives one; dosDevices is the mapping's folder, for the log. Only readLoop touches
	// them.
	paths      func(context.Context) context.Context
	dosDevices string
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
	untrack := s.e.Track(c, func() { c.t.close() })
	c.readLoop()
	untrack()
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
		if f.Method == wire.MethodClientPaths {
			// Served here, in order, so that every request read after it sees the mapping.
			c.enqueue(c.clientPaths(f), nil)
			continue
		}
		rctx := c.ctx
		if c.paths != nil {
			rctx = c.paths(rctx)
		}
		ctx, cancel := context.WithCancel(rctx)
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

// clientPaths serves wire.MethodClientPaths: it records the connection's drive mapping, once.
func (c *conn) clientPaths(f *wire.Frame) *wire.Frame {
	out := &wire.Frame{ID: f.ID}
	var a wire.ClientPathsArgs
	err := f.DecodeArgs(&a)
	switch {
	case err != nil:
		err = hresult.Errorf(computecore.HCS_E_PROTOCOL_ERROR, "%s: %v", wire.MethodClientPaths, err)
	case c.paths != nil:
		err = hresult.Errorf(computecore.HCS_E_INVALID_STATE, "%s: this connection already gave its drive mapping (%s)", wire.MethodClientPaths, c.dosDevices)
	default:
		if c.paths, err = c.srv.e.ClientPaths(a); err == nil {
			c.dosDevices = filepath.Clean(a.DosDevices)
		}
	}
	if err != nil {
		he := hresult.As(err)
		out.HResult, out.Result = he.HResult, wire.ResultError(he.HResult, he.Message)
		return out
	}
	log.G(c.ctx).WithField("dosDevices", c.dosDevices).Debug("hcsemu: client drive mapping")
	return out
}

// handle runs one request and builds its response.
func (c *conn) handle(ctx context.Context, f *wire.Frame) (*wire.Frame, []*os.File) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("method", f.Method))
	var (
		a   dispatch.Answer
		err error
	)
	if m, ok := c.srv.e.Method(f.Method); ok {
		if wire.IsFaultMethod(f.Method) && c.stdio != nil {
			// Fault injection is for the machine's owner (the unix socket), never for the
			// Wine stand-ins' TCP transport: see wire/fault.go.
			err = hresult.Errorf(computecore.E_ACCESSDENIED, "%s: fault injection is served on the unix socket only, not on TCP", f.Method)
		} else if err = c.srv.e.BeforeRequest(ctx, f.Method); err == nil {
			a, err = m(ctx, c, f)
		}
	} else {
		err = hresult.Errorf(computecore.HCS_E_UNKNOWN_MESSAGE, "unknown method %q", f.Method)
	}
	result, reply, files := a.Result, a.Reply, a.Files
	out := &wire.Frame{ID: f.ID}
	if err != nil {
		he := hresult.As(err)
		if isProtocolError(err) {
			he.HResult = computecore.HCS_E_PROTOCOL_ERROR // args this server cannot read
		}
		log.G(ctx).WithError(err).Debug("hcsemu: request failed")
		out.HResult = he.HResult
		out.Result = wire.ResultError(he.HResult, he.Message)
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
			he := &hresult.Error{HResult: computecore.E_FAIL, Message: fmt.Sprintf("%s: a reply of type %T cannot carry stdio", f.Method, reply)}
			out.HResult, out.Result = he.HResult, wire.ResultError(he.HResult, he.Message)
			return out, nil
		}
		token, terr := c.stdio.add(ctx, pr, files)
		if terr != nil {
			he := hresult.As(terr)
			out.HResult, out.Result = he.HResult, wire.ResultError(he.HResult, he.Message)
			return out, nil
		}
		pr.StdioToken = token
		reply, files = pr, nil
	}
	if reply != nil {
		b, merr := json.Marshal(reply)
		if merr != nil {
			out.HResult = computecore.E_FAIL
			out.Result = wire.ResultError(computecore.E_FAIL, merr.Error())
			return out, nil
		}
		out.Reply = b
	}
	return out, files
}

// isProtocolError reports an error that is not the engine's: args that could not be decoded.
func isProtocolError(err error) bool {
	var e *hresult.Error
	var hr computecore.HRESULT
	return !errors.As(err, &e) && !errors.As(err, &hr)
}
