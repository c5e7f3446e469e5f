//go:build unix

package client

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// NewHCS returns a client of the hcsemu daemon at $HCSEMU_ADDRESS (wire.AddressEnv), or at
// wire.DefaultAddress.
func NewHCS() (*HCS, error) {
	addr := os.Getenv(wire.AddressEnv)
	if addr == "" {
		addr = wire.DefaultAddress
	}
	return DialHCS(addr)
}

// HCS is the computecore.API of the hcsemu daemon: one connection, many concurrent
// calls. Handles are keys of its tables; operations are completed here when the daemon answers.
// When the connection drops, every open system and process is reported exited (then
// EventServiceDisconnect), pending operations fail with HCS_E_SERVICE_DISCONNECT, and so does
// every later call: nothing waits for a daemon that is gone.
type HCS struct {
	addr  string
	conn  *wire.Conn
	reqID atomic.Uint64
	opID  atomic.Uint64

	mu           sync.Mutex
	disconnected bool
	pending      map[uint64]*call
	nextHandle   uintptr
	ops          map[computecore.Operation]*emuOp
	systems      handles[computecore.System, wire.SystemRef]
	procs        handles[computecore.Process, wire.ProcessRef]
	// Events that arrived before the response that tells this client the instance or pid they
	// concern (the daemon may queue an exit before a create/open reply). Bounded.
	orphans     map[orphanKey]string
	orphanOrder []orphanKey
}

type orphanKey struct {
	ref wire.SystemRef
	pid uint32
}

const maxOrphans = 1024

var _ computecore.API = (*HCS)(nil)

// DialHCS connects to the hcsemu daemon at addr.
func DialHCS(addr string) (*HCS, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the HCS emulator is not running at %s: start it with `hcsemu --address %s`: %w: %w",
			addr, addr, computecore.HCS_E_SERVICE_NOT_AVAILABLE, err)
	}
	c := &HCS{
		addr:    addr,
		conn:    wire.NewConn(uc),
		pending: map[uint64]*call{},
		ops:     map[computecore.Operation]*emuOp{},
		systems: newHandles[computecore.System, wire.SystemRef](),
		procs:   newHandles[computecore.Process, wire.ProcessRef](),
		orphans: map[orphanKey]string{},
	}
	go c.readLoop()
	return c, nil
}

// Address is the socket this client is connected to.
func (c *HCS) Address() string { return c.addr }

// Close drops the connection, as if the daemon had gone: every open handle sees its system or
// process exit. Systems keep running in the daemon.
func (c *HCS) Close() error {
	return c.conn.Close()
}

// call is a request waiting for its response. complete runs on the reader goroutine with c.mu
// held, before any later frame is looked at, so that it can register what the response names.
type call struct {
	method   string
	complete func(f *wire.Frame, fds []int)
}

// errorFrame is the response a call gets when the daemon cannot answer.
func errorFrame(hr computecore.HRESULT, msg string) *wire.Frame {
	return &wire.Frame{HResult: hr, Result: wire.ResultError(hr, msg)}
}

// start sends a request; complete is called exactly once, with the response or with an
// HCS_E_SERVICE_DISCONNECT frame. It returns the request id.
func (c *HCS) start(method string, args any, complete func(f *wire.Frame, fds []int)) (uint64, error) {
	id := c.reqID.Add(1)
	f, err := wire.NewRequest(id, method, args)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", computecore.E_INVALIDARG, err)
	}
	c.mu.Lock()
	if c.disconnected {
		c.mu.Unlock()
		return 0, computecore.HCS_E_SERVICE_DISCONNECT
	}
	c.pending[id] = &call{method: method, complete: complete}
	c.mu.Unlock()
	if err := c.conn.Send(f); err != nil {
		// The reader sees the broken connection too and fails every pending call, this one
		// included; closing makes sure it does.
		log.L.WithError(err).WithField("method", method).Debug("hcsemu: send failed")
		c.conn.Close()
	}
	return id, nil
}

// roundTrip sends a request and waits for its response. before runs on the reader goroutine
// (see call); it may be nil.
func (c *HCS) roundTrip(method string, args any, before func(f *wire.Frame, fds []int)) (*wire.Frame, error) {
	done := make(chan *wire.Frame, 1)
	_, err := c.start(method, args, func(f *wire.Frame, fds []int) {
		if before != nil {
			before(f, fds)
		} else {
			closeFDs(fds)
		}
		done <- f
	})
	if err != nil {
		return nil, err
	}
	f := <-done
	if f.HResult != 0 {
		return f, f.HResult
	}
	return f, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func (c *HCS) readLoop() {
	for {
		f, fds, err := c.conn.Receive()
		if err != nil {
			c.disconnect(err)
			return
		}
		c.mu.Lock()
		if f.Event != nil {
			closeFDs(fds)
			c.onEvent(f.Event)
			c.mu.Unlock()
			continue
		}
		cl, ok := c.pending[f.ID]
		delete(c.pending, f.ID)
		if ok {
			cl.complete(f, fds)
		} else {
			closeFDs(fds)
		}
		c.mu.Unlock()
	}
}

// disconnect fails every pending call and reports every open system and process exited, then
// EventServiceDisconnect, as computecore.dll does when vmcompute goes away.
func (c *HCS) disconnect(cause error) {
	c.conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disconnected {
		return
	}
	c.disconnected = true
	log.L.WithError(cause).WithField("address", c.addr).Debug("hcsemu: connection closed")
	msg := fmt.Sprintf("the connection to the HCS emulator at %s was lost: %v", c.addr, cause)
	for id, cl := range c.pending {
		delete(c.pending, id)
		cl.complete(errorFrame(computecore.HCS_E_SERVICE_DISCONNECT, msg), nil)
	}
	hr := computecore.HCS_E_SERVICE_DISCONNECT
	status := int32(hr)
	c.systems.disconnect(fmt.Sprintf(`{"Status":%d,"ExitType":"UnexpectedExit"}`, status))
	c.procs.disconnect(fmt.Sprintf(`{"Status":%d,"ExitCode":4294967295}`, status))
}

func (c *HCS) onEvent(ev *wire.Event) {
	switch ev.Type {
	case computecore.EventSystemExited:
		if !c.systems.exitAll(ev.System, ev.Data) {
			c.addOrphan(orphanKey{ref: ev.System}, ev.Data)
		}
	case computecore.EventProcessExited:
		if !c.procs.exitAll(wire.ProcessRef{System: ev.System, PID: ev.PID}, ev.Data) {
			c.addOrphan(orphanKey{ref: ev.System, pid: ev.PID}, ev.Data)
		}
	default:
		log.L.WithField("event", ev.Type.String()).Debug("hcsemu: ignoring event")
	}
}

func (c *HCS) addOrphan(k orphanKey, data string) {
	if _, ok := c.orphans[k]; !ok {
		c.orphanOrder = append(c.orphanOrder, k)
	}
	c.orphans[k] = data
	for len(c.orphanOrder) > maxOrphans {
		delete(c.orphans, c.orphanOrder[0])
		c.orphanOrder = c.orphanOrder[1:]
	}
}

// takeOrphan returns (and forgets) an event that arrived before its handle was known.
func (c *HCS) takeOrphan(k orphanKey) (string, bool) {
	d, ok := c.orphans[k]
	if ok {
		delete(c.orphans, k)
	}
	return d, ok
}

func (c *HCS) newHandle() uintptr {
	c.nextHandle++
	return c.nextHandle
}

// notifier delivers a handle's events to its callback from one goroutine at a time, in order.
type notifier struct {
	mu      sync.Mutex
	cb      computecore.EventCallback
	ctx     uintptr
	queue   []computecore.Event
	running bool
	closed  bool
}

func (n *notifier) push(ev computecore.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cb == nil || n.closed {
		return
	}
	n.queue = append(n.queue, ev)
	if !n.running {
		n.running = true
		go n.run()
	}
}

func (n *notifier) run() {
	for {
		n.mu.Lock()
		if len(n.queue) == 0 || n.closed {
			n.running = false
			n.queue = nil
			n.mu.Unlock()
			return
		}
		ev := n.queue[0]
		n.queue = n.queue[1:]
		cb, ctx := n.cb, n.ctx
		n.mu.Unlock()
		cb(ev, ctx)
	}
}

func (n *notifier) set(cb computecore.EventCallback, ctx uintptr) {
	n.mu.Lock()
	n.cb, n.ctx = cb, ctx
	n.mu.Unlock()
}

func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}

// ---- Operations ----

type emuOp struct {
	id      uint64
	ctx     uintptr
	cb      computecore.EventCallback
	typ     computecore.OperationType
	started bool
	closed  bool
	reqID   uint64
	done    chan struct{}
	result  string
	err     error
	sys     computecore.System
	proc    computecore.Process
	pinfo   computecore.ProcessInformation
	fds     []int // descriptors in pinfo, until handed out
	handed  bool
}

// CreateOperation implements API.
func (c *HCS) CreateOperation(context uintptr, callback computecore.EventCallback) (computecore.Operation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := computecore.Operation(c.newHandle())
	c.ops[h] = &emuOp{id: c.opID.Add(1), ctx: context, cb: callback, typ: computecore.OperationTypeNone, done: make(chan struct{})}
	return h, nil
}

// CloseOperation implements API. Descriptors of a process never handed out are closed.
func (c *HCS) CloseOperation(op computecore.Operation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ops[op]
	if !ok {
		return
	}
	delete(c.ops, op)
	o.closed = true
	if !o.handed {
		closeFDs(o.fds)
		o.fds = nil
	}
}

func (c *HCS) op(op computecore.Operation) *emuOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

// GetOperationContext implements API.
func (c *HCS) GetOperationContext(op computecore.Operation) uintptr {
	if o := c.op(op); o != nil {
		return o.ctx
	}
	return 0
}

// SetOperationContext implements API.
func (c *HCS) SetOperationContext(op computecore.Operation, context uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ops[op]
	if !ok {
		return computecore.E_HANDLE
	}
	o.ctx = context
	return nil
}

// GetComputeSystemFromOperation implements API.
func (c *HCS) GetComputeSystemFromOperation(op computecore.Operation) computecore.System {
	if o := c.op(op); o != nil {
		return o.sys
	}
	return 0
}

// GetProcessFromOperation implements API.
func (c *HCS) GetProcessFromOperation(op computecore.Operation) computecore.Process {
	if o := c.op(op); o != nil {
		return o.proc
	}
	return 0
}

// GetOperationType implements API.
func (c *HCS) GetOperationType(op computecore.Operation) computecore.OperationType {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.ops[op]; o != nil {
		return o.typ
	}
	return computecore.OperationTypeNone
}

// GetOperationId implements API.
func (c *HCS) GetOperationId(op computecore.Operation) uint64 {
	if o := c.op(op); o != nil {
		return o.id
	}
	return 0
}

// GetOperationResult implements API.
func (c *HCS) GetOperationResult(op computecore.Operation) (string, error) {
	_, doc, err := c.operationResult(op, false)
	return doc, err
}

// GetOperationResultAndProcessInfo implements API.
func (c *HCS) GetOperationResultAndProcessInfo(op computecore.Operation) (computecore.ProcessInformation, string, error) {
	return c.operationResult(op, true)
}

// WaitForOperationResult implements API.
func (c *HCS) WaitForOperationResult(op computecore.Operation, timeoutMs uint32) (string, error) {
	if err := c.waitOp(op, timeoutMs); err != nil {
		return "", err
	}
	_, doc, err := c.operationResult(op, false)
	return doc, err
}

// WaitForOperationResultAndProcessInfo implements API.
func (c *HCS) WaitForOperationResultAndProcessInfo(op computecore.Operation, timeoutMs uint32) (computecore.ProcessInformation, string, error) {
	if err := c.waitOp(op, timeoutMs); err != nil {
		return computecore.ProcessInformation{}, "", err
	}
	return c.operationResult(op, true)
}

func (c *HCS) waitOp(op computecore.Operation, timeoutMs uint32) error {
	o := c.op(op)
	if o == nil {
		return computecore.E_HANDLE
	}
	c.mu.Lock()
	started := o.started
	c.mu.Unlock()
	if !started {
		return computecore.HCS_E_OPERATION_NOT_STARTED
	}
	return waitTimeout(o.done, timeoutMs)
}

// waitTimeout waits for ch, returning E_WAIT_TIMEOUT after timeoutMs (never with Infinite).
func waitTimeout(ch <-chan struct{}, timeoutMs uint32) error {
	if timeoutMs == computecore.Infinite {
		<-ch
		return nil
	}
	t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return computecore.E_WAIT_TIMEOUT
	}
}

func (c *HCS) operationResult(op computecore.Operation, withInfo bool) (computecore.ProcessInformation, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ops[op]
	if !ok {
		return computecore.ProcessInformation{}, "", computecore.E_HANDLE
	}
	if !o.started {
		return computecore.ProcessInformation{}, "", computecore.HCS_E_OPERATION_NOT_STARTED
	}
	select {
	case <-o.done:
	default:
		return computecore.ProcessInformation{}, "", computecore.HCS_E_OPERATION_PENDING
	}
	var pi computecore.ProcessInformation
	if withInfo {
		pi = o.pinfo
		if o.handed {
			// The caller owns the descriptors since the first call; do not give them twice.
			pi.StdInput, pi.StdOutput, pi.StdError = 0, 0, 0
		}
		o.handed = true
		o.fds = nil
	}
	return pi, o.result, o.err
}

// CancelOperation implements API: the daemon cancels the request, which then completes (with
// the cancellation, unless it finished first).
func (c *HCS) CancelOperation(op computecore.Operation) error {
	c.mu.Lock()
	o, ok := c.ops[op]
	if !ok {
		c.mu.Unlock()
		return computecore.E_HANDLE
	}
	if !o.started {
		c.mu.Unlock()
		return computecore.HCS_E_OPERATION_NOT_STARTED
	}
	req := o.reqID
	c.mu.Unlock()
	select {
	case <-o.done:
		return nil
	default:
	}
	_, err := c.start(wire.MethodCancel, wire.CancelArgs{Request: req}, func(_ *wire.Frame, fds []int) { closeFDs(fds) })
	return err
}

// beginOp claims an operation for a call; it fails if the operation is unknown or already used.
// c.mu must be held.
func (c *HCS) beginOp(op computecore.Operation, typ computecore.OperationType) (*emuOp, error) {
	o, ok := c.ops[op]
	if !ok {
		return nil, computecore.E_HANDLE
	}
	if o.started {
		return nil, computecore.HCS_E_OPERATION_ALREADY_STARTED
	}
	if c.disconnected {
		return nil, computecore.HCS_E_SERVICE_DISCONNECT
	}
	o.started = true
	o.typ = typ
	return o, nil
}

// finish completes an operation with a response; c.mu is held (reader goroutine).
func (c *HCS) finish(o *emuOp, f *wire.Frame) {
	o.result = f.Result
	if f.HResult != 0 {
		o.err = f.HResult
	}
	close(o.done)
	if o.cb != nil && !o.closed {
		cb, ctx, h := o.cb, o.ctx, o.id
		go cb(computecore.Event{Type: computecore.EventOperationCallback, Operation: computecore.Operation(h)}, ctx)
	}
}

// asyncOp runs method for op; onResponse (may be nil) runs before the operation completes.
func (c *HCS) asyncOp(op computecore.Operation, typ computecore.OperationType, method string, args any, onResponse func(o *emuOp, f *wire.Frame, fds []int)) error {
	c.mu.Lock()
	o, err := c.beginOp(op, typ)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	id, err := c.start(method, args, func(f *wire.Frame, fds []int) {
		if onResponse != nil {
			onResponse(o, f, fds)
		} else {
			closeFDs(fds)
		}
		c.finish(o, f)
	})
	if err != nil {
		c.mu.Lock()
		o.started = false
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	o.reqID = id
	c.mu.Unlock()
	return nil
}

// ---- Compute systems ----

type emuSystem = emuObject[wire.SystemRef]

// registerSystem indexes a confirmed system handle and applies an exit seen before it; c.mu held.
func (c *HCS) registerSystem(h computecore.System, s *emuSystem, r wire.SystemReply) {
	s.ref.Instance = r.Instance
	c.systems.confirm(h, s)
	if d, ok := c.takeOrphan(orphanKey{ref: s.ref}); ok {
		s.exit(d)
	} else if r.Stopped {
		s.exit(r.ExitStatus)
	}
}

// system looks up a handle for a call; a create that failed or has not finished has no system
// behind it in HCS.
func (c *HCS) system(cs computecore.System) (*emuSystem, error) {
	return lookup(c, &c.systems, cs, computecore.HCS_E_SYSTEM_NOT_FOUND)
}

// CreateComputeSystem implements API. The handle is returned at once; the operation says
// whether the daemon created the system.
func (c *HCS) CreateComputeSystem(id string, configuration string, op computecore.Operation, _ uintptr) (computecore.System, error) {
	c.mu.Lock()
	h := computecore.System(c.newHandle())
	s := newEmuObject(wire.SystemRef{ID: id}, computecore.EventSystemExited)
	c.systems.objs[h] = s
	if o := c.ops[op]; o != nil {
		o.sys = h
	}
	c.mu.Unlock()
	err := c.asyncOp(op, computecore.OperationTypeCreate, wire.MethodCreateComputeSystem,
		wire.CreateSystemArgs{ID: id, Configuration: configuration},
		func(_ *emuOp, f *wire.Frame, fds []int) {
			closeFDs(fds)
			var r wire.SystemReply
			if f.HResult != 0 {
				return
			}
			if err := f.DecodeReply(&r); err != nil {
				*f = *errorFrame(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
				return
			}
			if _, ok := c.systems.objs[h]; ok {
				c.registerSystem(h, s, r)
			}
		})
	if err != nil {
		c.mu.Lock()
		delete(c.systems.objs, h)
		c.mu.Unlock()
		return 0, err
	}
	return h, nil
}

// OpenComputeSystem implements API.
func (c *HCS) OpenComputeSystem(id string, _ uint32) (computecore.System, error) {
	c.mu.Lock()
	h := computecore.System(c.newHandle())
	s := newEmuObject(wire.SystemRef{ID: id}, computecore.EventSystemExited)
	c.systems.objs[h] = s
	c.mu.Unlock()
	_, err := c.roundTrip(wire.MethodOpenComputeSystem, wire.OpenSystemArgs{ID: id}, func(f *wire.Frame, fds []int) {
		closeFDs(fds)
		if f.HResult != 0 {
			return
		}
		var r wire.SystemReply
		if err := f.DecodeReply(&r); err != nil {
			*f = *errorFrame(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
			return
		}
		c.registerSystem(h, s, r)
	})
	if err != nil {
		c.mu.Lock()
		delete(c.systems.objs, h)
		c.mu.Unlock()
		return 0, err
	}
	return h, nil
}

// CloseComputeSystem implements API: no more callbacks; the daemon drops this handle's hold.
func (c *HCS) CloseComputeSystem(cs computecore.System) {
	if s, held := closeHandle(c, &c.systems, cs); held {
		// HcsCloseComputeSystem returns once the service has released the handle, so a system
		// whose last handle this was is gone for an OpenComputeSystem that follows.
		_, _ = c.roundTrip(wire.MethodCloseComputeSystem, wire.SystemArgs{System: s.ref}, nil)
	}
}

// EnumerateComputeSystems implements API; the result document is a JSON array of Properties.
func (c *HCS) EnumerateComputeSystems(query string, op computecore.Operation) error {
	return c.asyncOp(op, computecore.OperationTypeEnumerate, wire.MethodEnumerateComputeSystems, wire.QueryArgs{Query: query}, nil)
}

func (c *HCS) systemOp(cs computecore.System, op computecore.Operation, typ computecore.OperationType, method, doc string) error {
	s, err := c.system(cs)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if o := c.ops[op]; o != nil && !o.started {
		o.sys = cs
	}
	c.mu.Unlock()
	return c.asyncOp(op, typ, method, wire.SystemArgs{System: s.ref, Document: doc}, nil)
}

// StartComputeSystem implements API.
func (c *HCS) StartComputeSystem(cs computecore.System, op computecore.Operation, options string) error {
	return c.systemOp(cs, op, computecore.OperationTypeStart, wire.MethodStartComputeSystem, options)
}

// ShutDownComputeSystem implements API.
func (c *HCS) ShutDownComputeSystem(cs computecore.System, op computecore.Operation, options string) error {
	return c.systemOp(cs, op, computecore.OperationTypeShutdown, wire.MethodShutDownComputeSystem, options)
}

// TerminateComputeSystem implements API.
func (c *HCS) TerminateComputeSystem(cs computecore.System, op computecore.Operation, options string) error {
	return c.systemOp(cs, op, computecore.OperationTypeTerminate, wire.MethodTerminateComputeSystem, options)
}

// PauseComputeSystem implements API.
func (c *HCS) PauseComputeSystem(cs computecore.System, op computecore.Operation, options string) error {
	return c.systemOp(cs, op, computecore.OperationTypePause, wire.MethodPauseComputeSystem, options)
}

// ResumeComputeSystem implements API.
func (c *HCS) ResumeComputeSystem(cs computecore.System, op computecore.Operation, options string) error {
	return c.systemOp(cs, op, computecore.OperationTypeResume, wire.MethodResumeComputeSystem, options)
}

// GetComputeSystemProperties implements API.
func (c *HCS) GetComputeSystemProperties(cs computecore.System, op computecore.Operation, propertyQuery string) error {
	return c.systemOp(cs, op, computecore.OperationTypeGetProperties, wire.MethodGetComputeSystemProperties, propertyQuery)
}

// ModifyComputeSystem implements API.
func (c *HCS) ModifyComputeSystem(cs computecore.System, op computecore.Operation, configuration string, _ uintptr) error {
	return c.systemOp(cs, op, computecore.OperationTypeModify, wire.MethodModifyComputeSystem, configuration)
}

// WaitForComputeSystemExit implements API; the result is the SystemExitStatus document.
func (c *HCS) WaitForComputeSystemExit(cs computecore.System, timeoutMs uint32) (string, error) {
	return waitExit(c, &c.systems, cs, timeoutMs)
}

// SetComputeSystemCallback implements API. If the system has already exited, the callback gets
// EventSystemExited at once (and EventServiceDisconnect if the daemon has gone), so that a
// caller registering late never waits for an event that came before it.
func (c *HCS) SetComputeSystemCallback(cs computecore.System, _ computecore.EventOptions, context uintptr, callback computecore.EventCallback) error {
	return setCallback(c, &c.systems, cs, context, callback)
}

// ---- Processes ----

type emuProcess = emuObject[wire.ProcessRef]

func (c *HCS) registerProcess(h computecore.Process, p *emuProcess, r wire.ProcessReply) {
	p.ref.PID = r.PID
	c.procs.confirm(h, p)
	if d, ok := c.takeOrphan(orphanKey{ref: p.ref.System, pid: p.ref.PID}); ok {
		p.exit(d)
	} else if r.Exited {
		p.exit(r.ExitStatus)
	}
}

func (c *HCS) process(ph computecore.Process) (*emuProcess, error) {
	return lookup(c, &c.procs, ph, computecore.HCS_E_PROCESS_INFO_NOT_AVAILABLE)
}

// CreateProcess implements API. The std handles arrive with the response and are handed to
// the first GetOperationResultAndProcessInfo / WaitForOperationResultAndProcessInfo.
func (c *HCS) CreateProcess(cs computecore.System, processParameters string, op computecore.Operation, _ uintptr) (computecore.Process, error) {
	s, err := c.system(cs)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	h := computecore.Process(c.newHandle())
	p := newEmuObject(wire.ProcessRef{System: s.ref}, computecore.EventProcessExited)
	c.procs.objs[h] = p
	if o := c.ops[op]; o != nil && !o.started {
		o.sys, o.proc = cs, h
	}
	c.mu.Unlock()
	err = c.asyncOp(op, computecore.OperationTypeCreateProcess, wire.MethodCreateProcess,
		wire.CreateProcessArgs{System: s.ref, Parameters: processParameters},
		func(o *emuOp, f *wire.Frame, fds []int) {
			if f.HResult != 0 {
				closeFDs(fds)
				return
			}
			var r wire.ProcessReply
			if err := f.DecodeReply(&r); err != nil {
				closeFDs(fds)
				*f = *errorFrame(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
				return
			}
			pi, owned, err := stdioFromReply(r, fds)
			if err != nil {
				closeFDs(fds)
				*f = *errorFrame(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
				return
			}
			o.pinfo, o.fds = pi, owned
			if o.closed {
				closeFDs(owned)
				o.fds = nil
			}
			if _, ok := c.procs.objs[h]; ok {
				c.registerProcess(h, p, r)
			}
		})
	if err != nil {
		c.mu.Lock()
		delete(c.procs.objs, h)
		c.mu.Unlock()
		return 0, err
	}
	return h, nil
}

// stdioFromReply places the received descriptors in their slots. A console master comes once
// and is duplicated, so that StdInput and StdOutput are distinct descriptors the caller can
// close independently (as HCS's two pipe handles of a pseudo console are).
func stdioFromReply(r wire.ProcessReply, fds []int) (computecore.ProcessInformation, []int, error) {
	pi := computecore.ProcessInformation{ProcessID: r.PID}
	want := 0
	for _, ok := range r.Stdio {
		if ok {
			want++
		}
	}
	if r.Console {
		want = 1
	}
	if len(fds) != want {
		return pi, nil, fmt.Errorf("process %d: %d descriptors received, %d expected", r.PID, len(fds), want)
	}
	if r.Console {
		if len(fds) == 0 {
			return pi, nil, nil
		}
		d, err := unix.FcntlInt(uintptr(fds[0]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return pi, nil, fmt.Errorf("duplicate the console of process %d: %w", r.PID, err)
		}
		pi.StdInput, pi.StdOutput = uintptr(fds[0]), uintptr(d)
		return pi, []int{fds[0], d}, nil
	}
	slots := []*uintptr{&pi.StdInput, &pi.StdOutput, &pi.StdError}
	i := 0
	for slot, ok := range r.Stdio {
		if ok {
			*slots[slot] = uintptr(fds[i])
			i++
		}
	}
	return pi, fds, nil
}

// OpenProcess implements API. An opened process has no std handles (as in HCS).
func (c *HCS) OpenProcess(cs computecore.System, processID uint32, _ uint32) (computecore.Process, error) {
	s, err := c.system(cs)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	h := computecore.Process(c.newHandle())
	p := newEmuObject(wire.ProcessRef{System: s.ref}, computecore.EventProcessExited)
	c.procs.objs[h] = p
	c.mu.Unlock()
	_, err = c.roundTrip(wire.MethodOpenProcess, wire.ProcessRef{System: s.ref, PID: processID}, func(f *wire.Frame, fds []int) {
		closeFDs(fds)
		if f.HResult != 0 {
			return
		}
		var r wire.ProcessReply
		if err := f.DecodeReply(&r); err != nil {
			*f = *errorFrame(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
			return
		}
		c.registerProcess(h, p, r)
	})
	if err != nil {
		c.mu.Lock()
		delete(c.procs.objs, h)
		c.mu.Unlock()
		return 0, err
	}
	return h, nil
}

// CloseProcess implements API.
func (c *HCS) CloseProcess(ph computecore.Process) {
	if p, held := closeHandle(c, &c.procs, ph); held {
		// Synchronous, as HcsCloseProcess is.
		_, _ = c.roundTrip(wire.MethodCloseProcess, wire.ProcessArgs{Process: p.ref}, nil)
	}
}

func (c *HCS) processOp(ph computecore.Process, op computecore.Operation, typ computecore.OperationType, method, doc string) error {
	p, err := c.process(ph)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if o := c.ops[op]; o != nil && !o.started {
		o.proc = ph
	}
	c.mu.Unlock()
	return c.asyncOp(op, typ, method, wire.ProcessArgs{Process: p.ref, Document: doc}, nil)
}

// TerminateProcess implements API.
func (c *HCS) TerminateProcess(ph computecore.Process, op computecore.Operation, options string) error {
	// computecore.h has no operation type of its own for terminating a process; HCS reports
	// it as a signal.
	return c.processOp(ph, op, computecore.OperationTypeSignalProcess, wire.MethodTerminateProcess, options)
}

// SignalProcess implements API.
func (c *HCS) SignalProcess(ph computecore.Process, op computecore.Operation, options string) error {
	return c.processOp(ph, op, computecore.OperationTypeSignalProcess, wire.MethodSignalProcess, options)
}

// GetProcessInfo implements API: the pid, without std handles (those go to the creator only).
func (c *HCS) GetProcessInfo(ph computecore.Process, op computecore.Operation) error {
	p, err := c.process(ph)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o, err := c.beginOp(op, computecore.OperationTypeGetProcessInfo)
	if err != nil {
		return err
	}
	o.proc = ph
	o.pinfo = computecore.ProcessInformation{ProcessID: p.ref.PID}
	c.finish(o, &wire.Frame{})
	return nil
}

// GetProcessProperties implements API; the result is a ProcessStatus document.
func (c *HCS) GetProcessProperties(ph computecore.Process, op computecore.Operation, propertyQuery string) error {
	return c.processOp(ph, op, computecore.OperationTypeGetProcessProperties, wire.MethodGetProcessProperties, propertyQuery)
}

// ModifyProcess implements API.
func (c *HCS) ModifyProcess(ph computecore.Process, op computecore.Operation, settings string) error {
	return c.processOp(ph, op, computecore.OperationTypeModifyProcess, wire.MethodModifyProcess, settings)
}

// WaitForProcessExit implements API; the result is the ProcessExitedEventData document.
func (c *HCS) WaitForProcessExit(ph computecore.Process, timeoutMs uint32) (string, error) {
	return waitExit(c, &c.procs, ph, timeoutMs)
}

// SetProcessCallback implements API, delivering an exit that came before it (see
// SetComputeSystemCallback).
func (c *HCS) SetProcessCallback(ph computecore.Process, _ computecore.EventOptions, context uintptr, callback computecore.EventCallback) error {
	return setCallback(c, &c.procs, ph, context, callback)
}

// ---- The service ----

// GetServiceProperties implements API.
func (c *HCS) GetServiceProperties(propertyQuery string) (string, error) {
	f, err := c.roundTrip(wire.MethodGetServiceProperties, wire.QueryArgs{Query: propertyQuery}, nil)
	if f == nil {
		return "", err
	}
	return f.Result, err
}

// ModifyServiceSettings implements API.
func (c *HCS) ModifyServiceSettings(settings string) (string, error) {
	f, err := c.roundTrip(wire.MethodModifyServiceSettings, wire.ModifyServiceArgs{Settings: settings}, nil)
	if f == nil {
		return "", err
	}
	return f.Result, err
}
