package hcsemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Server serves an Engine to clients on a unix socket, one connection per client process.
// Requests on a connection run concurrently; responses and events go out through one queue
// per connection that never blocks the engine.
type Server struct {
	e *Engine

	mu    sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup
}

// NewServer returns a server of e.
func NewServer(e *Engine) *Server {
	return &Server{e: e, conns: map[*conn]struct{}{}}
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

// Serve accepts connections until ln is closed, then closes them all and returns.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	defer func() {
		s.mu.Lock()
		for c := range s.conns {
			c.wc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	}()
	for {
		uc, err := ln.AcceptUnix()
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
		c := &conn{srv: s, wc: wire.NewConn(uc), reqs: map[uint64]context.CancelFunc{}}
		c.cond = sync.NewCond(&c.mu)
		c.ctx, c.cancel = context.WithCancel(log.WithLogger(context.WithoutCancel(ctx), log.G(ctx)))
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(2)
		go c.writeLoop()
		go c.readLoop()
	}
}

// conn is one client connection; it is the engine's Subscriber for the handles it holds.
type conn struct {
	srv    *Server
	wc     *wire.Conn
	ctx    context.Context
	cancel context.CancelFunc

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
	defer c.srv.wg.Done()
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
		fds := make([]int, len(o.files))
		for i, f := range o.files {
			fds[i] = int(f.Fd())
		}
		err := c.wc.Send(o.f, fds...)
		for _, f := range o.files {
			f.Close()
		}
		if err != nil {
			log.G(c.ctx).WithError(err).Debug("hcsemu: write to client failed")
			c.wc.Close() // the reader ends and cleans up
		}
	}
}

func (c *conn) readLoop() {
	defer c.srv.wg.Done()
	for {
		f, fds, err := c.wc.Receive()
		for _, fd := range fds {
			syscall.Close(fd) // clients send none
		}
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
	c.wc.Close()
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
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
		err = errorf(computecore.HCS_E_UNKNOWN_MESSAGE, "unknown method %q", f.Method)
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

// Run is the daemon: an engine served at address until ctx is done, then every system is
// terminated and the socket removed.
func Run(ctx context.Context, cfg Config, address string) error {
	// The socket first: a second daemon on the same address stops here, before its engine
	// touches anything.
	ln, err := Listen(address)
	if err != nil {
		return err
	}
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		ln.Close()
		return err
	}
	log.G(ctx).WithFields(log.Fields{"address": address, "root": e.cfg.Root, "osVersion": e.cfg.OSVersion}).Info("hcsemu: serving")
	srv := NewServer(e)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	select {
	case <-ctx.Done():
		ln.Close()
		err = <-done
	case err = <-done:
		ln.Close()
	}
	log.G(ctx).Info("hcsemu: shutting down: terminating every compute system")
	cerr := e.Close(context.WithoutCancel(ctx))
	os.Remove(address)
	return errors.Join(err, cerr)
}
