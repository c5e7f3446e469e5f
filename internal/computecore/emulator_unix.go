//go:build unix

package computecore

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// New returns a client of the hcsemu daemon at $HCSEMU_ADDRESS, or at DefaultAddress.
func New() (API, error) {
	addr := os.Getenv(AddressEnv)
	if addr == "" {
		addr = DefaultAddress
	}
	return DialEmulator(addr)
}

// EmulatorClient is the computecore.API of the hcsemu daemon: one connection, many concurrent
// calls. Handles are keys of its tables; operations are completed here when the daemon answers.
// When the connection drops, every open system and process is reported exited (then
// EventServiceDisconnect), pending operations fail with HCS_E_SERVICE_DISCONNECT, and so does
// every later call: nothing waits for a daemon that is gone.
type EmulatorClient struct {
	addr  string
	conn  *wire.Conn
	reqID atomic.Uint64
	opID  atomic.Uint64

	mu           sync.Mutex
	disconnected bool
	pending      map[uint64]*call
	nextHandle   uintptr
	ops          map[Operation]*emuOp
	systems      handles[System, wire.SystemRef]
	procs        handles[Process, wire.ProcessRef]
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

var _ API = (*EmulatorClient)(nil)

// DialEmulator connects to the hcsemu daemon at addr.
func DialEmulator(addr string) (*EmulatorClient, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the HCS emulator is not running at %s: start it with `hcsemu --address %s`: %w: %w",
			addr, addr, HCS_E_SERVICE_NOT_AVAILABLE, err)
	}
	c := &EmulatorClient{
		addr:    addr,
		conn:    wire.NewConn(uc),
		pending: map[uint64]*call{},
		ops:     map[Operation]*emuOp{},
		systems: newHandles[System, wire.SystemRef](),
		procs:   newHandles[Process, wire.ProcessRef](),
		orphans: map[orphanKey]string{},
	}
	go c.readLoop()
	return c, nil
}

// Address is the socket this client is connected to.
func (c *EmulatorClient) Address() string { return c.addr }

// Close drops the connection, as if the daemon had gone: every open handle sees its system or
// process exit. Systems keep running in the daemon.
func (c *EmulatorClient) Close() error {
	return c.conn.Close()
}

// call is a request waiting for its response. complete runs on the reader goroutine with c.mu
// held, before any later frame is looked at, so that it can register what the response names.
type call struct {
	method   string
	complete func(f *wire.Frame, fds []int)
}

// errorFrame is the response a call gets when the daemon cannot answer.
func errorFrame(hr HRESULT, msg string) *wire.Frame {
	return &wire.Frame{HResult: uint32(hr), Result: resultErrorDoc(hr, msg)}
}

// resultErrorDoc is HCS's ResultError document.
func resultErrorDoc(hr HRESULT, msg string) string {
	b, _ := json.Marshal(struct {
		Error        int32
		ErrorMessage string
		ErrorEvents  []struct{ Message string }
	}{int32(uint32(hr)), msg, []struct{ Message string }{{msg}}})
	return string(b)
}

// start sends a request; complete is called exactly once, with the response or with an
// HCS_E_SERVICE_DISCONNECT frame. It returns the request id.
func (c *EmulatorClient) start(method string, args any, complete func(f *wire.Frame, fds []int)) (uint64, error) {
	id := c.reqID.Add(1)
	f, err := wire.NewRequest(id, method, args)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", E_INVALIDARG, err)
	}
	c.mu.Lock()
	if c.disconnected {
		c.mu.Unlock()
		return 0, HCS_E_SERVICE_DISCONNECT
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
func (c *EmulatorClient) roundTrip(method string, args any, before func(f *wire.Frame, fds []int)) (*wire.Frame, error) {
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
		return f, HRESULT(f.HResult)
	}
	return f, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func (c *EmulatorClient) readLoop() {
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
func (c *EmulatorClient) disconnect(cause error) {
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
		cl.complete(errorFrame(HCS_E_SERVICE_DISCONNECT, msg), nil)
	}
	hr := HCS_E_SERVICE_DISCONNECT
	status := int32(hr)
	c.systems.disconnect(fmt.Sprintf(`{"Status":%d,"ExitType":"UnexpectedExit"}`, status))
	c.procs.disconnect(fmt.Sprintf(`{"Status":%d,"ExitCode":4294967295}`, status))
}

func (c *EmulatorClient) onEvent(ev *wire.Event) {
	switch EventType(ev.Type) {
	case EventSystemExited:
		if !c.systems.exitAll(ev.System, ev.Data) {
			c.addOrphan(orphanKey{ref: ev.System}, ev.Data)
		}
	case EventProcessExited:
		if !c.procs.exitAll(wire.ProcessRef{System: ev.System, PID: ev.PID}, ev.Data) {
			c.addOrphan(orphanKey{ref: ev.System, pid: ev.PID}, ev.Data)
		}
	default:
		log.L.WithField("event", EventType(ev.Type).String()).Debug("hcsemu: ignoring event")
	}
}

func (c *EmulatorClient) addOrphan(k orphanKey, data string) {
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
func (c *EmulatorClient) takeOrphan(k orphanKey) (string, bool) {
	d, ok := c.orphans[k]
	if ok {
		delete(c.orphans, k)
	}
	return d, ok
}

func (c *EmulatorClient) newHandle() uintptr {
	c.nextHandle++
	return c.nextHandle
}

// notifier delivers a handle's events to its callback from one goroutine at a time, in order.
type notifier struct {
	mu      sync.Mutex
	cb      EventCallback
	ctx     uintptr
	queue   []Event
	running bool
	closed  bool
}

func (n *notifier) push(ev Event) {
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

func (n *notifier) set(cb EventCallback, ctx uintptr) {
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
	cb      EventCallback
	typ     OperationType
	started bool
	closed  bool
	reqID   uint64
	done    chan struct{}
	result  string
	err     error
	sys     System
	proc    Process
	pinfo   ProcessInformation
	fds     []int // descriptors in pinfo, until handed out
	handed  bool
}

// CreateOperation implements API.
func (c *EmulatorClient) CreateOperation(context uintptr, callback EventCallback) (Operation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := Operation(c.newHandle())
	c.ops[h] = &emuOp{id: c.opID.Add(1), ctx: context, cb: callback, typ: OperationTypeNone, done: make(chan struct{})}
	return h, nil
}

// CloseOperation implements API. Descriptors of a process never handed out are closed.
func (c *EmulatorClient) CloseOperation(op Operation) {
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

func (c *EmulatorClient) op(op Operation) *emuOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

// GetOperationContext implements API.
func (c *EmulatorClient) GetOperationContext(op Operation) uintptr {
	if o := c.op(op); o != nil {
		return o.ctx
	}
	return 0
}

// SetOperationContext implements API.
func (c *EmulatorClient) SetOperationContext(op Operation, context uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ops[op]
	if !ok {
		return E_HANDLE
	}
	o.ctx = context
	return nil
}

// GetComputeSystemFromOperation implements API.
func (c *EmulatorClient) GetComputeSystemFromOperation(op Operation) System {
	if o := c.op(op); o != nil {
		return o.sys
	}
	return 0
}

// GetProcessFromOperation implements API.
func (c *EmulatorClient) GetProcessFromOperation(op Operation) Process {
	if o := c.op(op); o != nil {
		return o.proc
	}
	return 0
}

// GetOperationType implements API.
func (c *EmulatorClient) GetOperationType(op Operation) OperationType {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.ops[op]; o != nil {
		return o.typ
	}
	return OperationTypeNone
}

// GetOperationId implements API.
func (c *EmulatorClient) GetOperationId(op Operation) uint64 {
	if o := c.op(op); o != nil {
		return o.id
	}
	return 0
}

// GetOperationResult implements API.
func (c *EmulatorClient) GetOperationResult(op Operation) (string, error) {
	_, doc, err := c.operationResult(op, false)
	return doc, err
}

// GetOperationResultAndProcessInfo implements API.
func (c *EmulatorClient) GetOperationResultAndProcessInfo(op Operation) (ProcessInformation, string, error) {
	return c.operationResult(op, true)
}

// WaitForOperationResult implements API.
func (c *EmulatorClient) WaitForOperationResult(op Operation, timeoutMs uint32) (string, error) {
	if err := c.waitOp(op, timeoutMs); err != nil {
		return "", err
	}
	_, doc, err := c.operationResult(op, false)
	return doc, err
}

// WaitForOperationResultAndProcessInfo implements API.
func (c *EmulatorClient) WaitForOperationResultAndProcessInfo(op Operation, timeoutMs uint32) (ProcessInformation, string, error) {
	if err := c.waitOp(op, timeoutMs); err != nil {
		return ProcessInformation{}, "", err
	}
	return c.operationResult(op, true)
}

func (c *EmulatorClient) waitOp(op Operation, timeoutMs uint32) error {
	o := c.op(op)
	if o == nil {
		return E_HANDLE
	}
	c.mu.Lock()
	started := o.started
	c.mu.Unlock()
	if !started {
		return HCS_E_OPERATION_NOT_STARTED
	}
	return waitTimeout(o.done, timeoutMs)
}

// waitTimeout waits for ch, returning E_WAIT_TIMEOUT after timeoutMs (never with Infinite).
func waitTimeout(ch <-chan struct{}, timeoutMs uint32) error {
	if timeoutMs == Infinite {
		<-ch
		return nil
	}
	t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return E_WAIT_TIMEOUT
	}
}

func (c *EmulatorClient) operationResult(op Operation, withInfo bool) (ProcessInformation, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ops[op]
	if !ok {
		return ProcessInformation{}, "", E_HANDLE
	}
	if !o.started {
		return ProcessInformation{}, "", HCS_E_OPERATION_NOT_STARTED
	}
	select {
	case <-o.done:
	default:
		return ProcessInformation{}, "", HCS_E_OPERATION_PENDING
	}
	var pi ProcessInformation
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
func (c *EmulatorClient) CancelOperation(op Operation) error {
	c.mu.Lock()
	o, ok := c.ops[op]
	if !ok {
		c.mu.Unlock()
		return E_HANDLE
	}
	if !o.started {
		c.mu.Unlock()
		return HCS_E_OPERATION_NOT_STARTED
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
func (c *EmulatorClient) beginOp(op Operation, typ OperationType) (*emuOp, error) {
	o, ok := c.ops[op]
	if !ok {
		return nil, E_HANDLE
	}
	if o.started {
		return nil, HCS_E_OPERATION_ALREADY_STARTED
	}
	if c.disconnected {
		return nil, HCS_E_SERVICE_DISCONNECT
	}
	o.started = true
	o.typ = typ
	return o, nil
}

// finish completes an operation with a response; c.mu is held (reader goroutine).
func (c *EmulatorClient) finish(o *emuOp, f *wire.Frame) {
	o.result = f.Result
	if f.HResult != 0 {
		o.err = HRESULT(f.HResult)
	}
	close(o.done)
	if o.cb != nil && !o.closed {
		cb, ctx, h := o.cb, o.ctx, o.id
		go cb(Event{Type: EventOperationCallback, Operation: Operation(h)}, ctx)
	}
}

// asyncOp runs method for op; onResponse (may be nil) runs before the operation completes.
func (c *EmulatorClient) asyncOp(op Operation, typ OperationType, method string, args any, onResponse func(o *emuOp, f *wire.Frame, fds []int)) error {
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
func (c *EmulatorClient) registerSystem(h System, s *emuSystem, r wire.SystemReply) {
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
func (c *EmulatorClient) system(cs System) (*emuSystem, error) {
	return lookup(c, &c.systems, cs, HCS_E_SYSTEM_NOT_FOUND)
}

// CreateComputeSystem implements API. The handle is returned at once; the operation says
// whether the daemon created the system.
func (c *EmulatorClient) CreateComputeSystem(id string, configuration string, op Operation, _ uintptr) (System, error) {
	c.mu.Lock()
	h := System(c.newHandle())
	s := newEmuObject(wire.SystemRef{ID: id}, EventSystemExited)
	c.systems.objs[h] = s
	if o := c.ops[op]; o != nil {
		o.sys = h
	}
	c.mu.Unlock()
	err := c.asyncOp(op, OperationTypeCreate, wire.MethodCreateComputeSystem,
		wire.CreateSystemArgs{ID: id, Configuration: configuration},
		func(_ *emuOp, f *wire.Frame, fds []int) {
			closeFDs(fds)
			var r wire.SystemReply
			if f.HResult != 0 {
				return
			}
			if err := f.DecodeReply(&r); err != nil {
				*f = *errorFrame(HCS_E_PROTOCOL_ERROR, err.Error())
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
func (c *EmulatorClient) OpenComputeSystem(id string, _ uint32) (System, error) {
	c.mu.Lock()
	h := System(c.newHandle())
	s := newEmuObject(wire.SystemRef{ID: id}, EventSystemExited)
	c.systems.objs[h] = s
	c.mu.Unlock()
	_, err := c.roundTrip(wire.MethodOpenComputeSystem, wire.OpenSystemArgs{ID: id}, func(f *wire.Frame, fds []int) {
		closeFDs(fds)
		if f.HResult != 0 {
			return
		}
		var r wire.SystemReply
		if err := f.DecodeReply(&r); err != nil {
			*f = *errorFrame(HCS_E_PROTOCOL_ERROR, err.Error())
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
func (c *EmulatorClient) CloseComputeSystem(cs System) {
	if s, held := closeHandle(c, &c.systems, cs); held {
		// HcsCloseComputeSystem returns once the service has released the handle, so a system
		// whose last handle this was is gone for an OpenComputeSystem that follows.
		_, _ = c.roundTrip(wire.MethodCloseComputeSystem, wire.SystemArgs{System: s.ref}, nil)
	}
}

// EnumerateComputeSystems implements API; the result document is a JSON array of Properties.
func (c *EmulatorClient) EnumerateComputeSystems(query string, op Operation) error {
	return c.asyncOp(op, OperationTypeEnumerate, wire.MethodEnumerateComputeSystems, wire.QueryArgs{Query: query}, nil)
}

func (c *EmulatorClient) systemOp(cs System, op Operation, typ OperationType, method, doc string) error {
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
func (c *EmulatorClient) StartComputeSystem(cs System, op Operation, options string) error {
	return c.systemOp(cs, op, OperationTypeStart, wire.MethodStartComputeSystem, options)
}

// ShutDownComputeSystem implements API.
func (c *EmulatorClient) ShutDownComputeSystem(cs System, op Operation, options string) error {
	return c.systemOp(cs, op, OperationTypeShutdown, wire.MethodShutDownComputeSystem, options)
}

// TerminateComputeSystem implements API.
func (c *EmulatorClient) TerminateComputeSystem(cs System, op Operation, options string) error {
	return c.systemOp(cs, op, OperationTypeTerminate, wire.MethodTerminateComputeSystem, options)
}

// PauseComputeSystem implements API.
func (c *EmulatorClient) PauseComputeSystem(cs System, op Operation, options string) error {
	return c.systemOp(cs, op, OperationTypePause, wire.MethodPauseComputeSystem, options)
}

// ResumeComputeSystem implements API.
func (c *EmulatorClient) ResumeComputeSystem(cs System, op Operation, options string) error {
	return c.systemOp(cs, op, OperationTypeResume, wire.MethodResumeComputeSystem, options)
}

// GetComputeSystemProperties implements API.
func (c *EmulatorClient) GetComputeSystemProperties(cs System, op Operation, propertyQuery string) error {
	return c.systemOp(cs, op, OperationTypeGetProperties, wire.MethodGetComputeSystemProperties, propertyQuery)
}

// ModifyComputeSystem implements API.
func (c *EmulatorClient) ModifyComputeSystem(cs System, op Operation, configuration string, _ uintptr) error {
	return c.systemOp(cs, op, OperationTypeModify, wire.MethodModifyComputeSystem, configuration)
}

// WaitForComputeSystemExit implements API; the result is the SystemExitStatus document.
func (c *EmulatorClient) WaitForComputeSystemExit(cs System, timeoutMs uint32) (string, error) {
	return waitExit(c, &c.systems, cs, timeoutMs)
}

// SetComputeSystemCallback implements API. If the system has already exited, the callback gets
// EventSystemExited at once (and EventServiceDisconnect if the daemon has gone), so that a
// caller registering late never waits for an event that came before it.
func (c *EmulatorClient) SetComputeSystemCallback(cs System, _ EventOptions, context uintptr, callback EventCallback) error {
	return setCallback(c, &c.systems, cs, context, callback)
}

// ---- Processes ----

type emuProcess = emuObject[wire.ProcessRef]

func (c *EmulatorClient) registerProcess(h Process, p *emuProcess, r wire.ProcessReply) {
	p.ref.PID = r.PID
	c.procs.confirm(h, p)
	if d, ok := c.takeOrphan(orphanKey{ref: p.ref.System, pid: p.ref.PID}); ok {
		p.exit(d)
	} else if r.Exited {
		p.exit(r.ExitStatus)
	}
}

func (c *EmulatorClient) process(ph Process) (*emuProcess, error) {
	return lookup(c, &c.procs, ph, HCS_E_PROCESS_INFO_NOT_AVAILABLE)
}

// CreateProcess implements API. The std handles arrive with the response and are handed to
// the first GetOperationResultAndProcessInfo / WaitForOperationResultAndProcessInfo.
func (c *EmulatorClient) CreateProcess(cs System, processParameters string, op Operation, _ uintptr) (Process, error) {
	s, err := c.system(cs)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	h := Process(c.newHandle())
	p := newEmuObject(wire.ProcessRef{System: s.ref}, EventProcessExited)
	c.procs.objs[h] = p
	if o := c.ops[op]; o != nil && !o.started {
		o.sys, o.proc = cs, h
	}
	c.mu.Unlock()
	err = c.asyncOp(op, OperationTypeCreateProcess, wire.MethodCreateProcess,
		wire.CreateProcessArgs{System: s.ref, Parameters: processParameters},
		func(o *emuOp, f *wire.Frame, fds []int) {
			if f.HResult != 0 {
				closeFDs(fds)
				return
			}
			var r wire.ProcessReply
			if err := f.DecodeReply(&r); err != nil {
				closeFDs(fds)
				*f = *errorFrame(HCS_E_PROTOCOL_ERROR, err.Error())
				return
			}
			pi, owned, err := stdioFromReply(r, fds)
			if err != nil {
				closeFDs(fds)
				*f = *errorFrame(HCS_E_PROTOCOL_ERROR, err.Error())
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
func stdioFromReply(r wire.ProcessReply, fds []int) (ProcessInformation, []int, error) {
	pi := ProcessInformation{ProcessID: r.PID}
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
func (c *EmulatorClient) OpenProcess(cs System, processID uint32, _ uint32) (Process, error) {
	s, err := c.system(cs)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	h := Process(c.newHandle())
	p := newEmuObject(wire.ProcessRef{System: s.ref}, EventProcessExited)
	c.procs.objs[h] = p
	c.mu.Unlock()
	_, err = c.roundTrip(wire.MethodOpenProcess, wire.ProcessRef{System: s.ref, PID: processID}, func(f *wire.Frame, fds []int) {
		closeFDs(fds)
		if f.HResult != 0 {
			return
		}
		var r wire.ProcessReply
		if err := f.DecodeReply(&r); err != nil {
			*f = *errorFrame(HCS_E_PROTOCOL_ERROR, err.Error())
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
func (c *EmulatorClient) CloseProcess(ph Process) {
	if p, held := closeHandle(c, &c.procs, ph); held {
		// Synchronous, as HcsCloseProcess is.
		_, _ = c.roundTrip(wire.MethodCloseProcess, wire.ProcessArgs{Process: p.ref}, nil)
	}
}

func (c *EmulatorClient) processOp(ph Process, op Operation, typ OperationType, method, doc string) error {
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
func (c *EmulatorClient) TerminateProcess(ph Process, op Operation, options string) error {
	// computecore.h has no operation type of its own for terminating a process; HCS reports
	// it as a signal.
	return c.processOp(ph, op, OperationTypeSignalProcess, wire.MethodTerminateProcess, options)
}

// SignalProcess implements API.
func (c *EmulatorClient) SignalProcess(ph Process, op Operation, options string) error {
	return c.processOp(ph, op, OperationTypeSignalProcess, wire.MethodSignalProcess, options)
}

// GetProcessInfo implements API: the pid, without std handles (those go to the creator only).
func (c *EmulatorClient) GetProcessInfo(ph Process, op Operation) error {
	p, err := c.process(ph)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o, err := c.beginOp(op, OperationTypeGetProcessInfo)
	if err != nil {
		return err
	}
	o.proc = ph
	o.pinfo = ProcessInformation{ProcessID: p.ref.PID}
	c.finish(o, &wire.Frame{})
	return nil
}

// GetProcessProperties implements API; the result is a ProcessStatus document.
func (c *EmulatorClient) GetProcessProperties(ph Process, op Operation, propertyQuery string) error {
	return c.processOp(ph, op, OperationTypeGetProcessProperties, wire.MethodGetProcessProperties, propertyQuery)
}

// ModifyProcess implements API.
func (c *EmulatorClient) ModifyProcess(ph Process, op Operation, settings string) error {
	return c.processOp(ph, op, OperationTypeModifyProcess, wire.MethodModifyProcess, settings)
}

// WaitForProcessExit implements API; the result is the ProcessExitedEventData document.
func (c *EmulatorClient) WaitForProcessExit(ph Process, timeoutMs uint32) (string, error) {
	return waitExit(c, &c.procs, ph, timeoutMs)
}

// SetProcessCallback implements API, delivering an exit that came before it (see
// SetComputeSystemCallback).
func (c *EmulatorClient) SetProcessCallback(ph Process, _ EventOptions, context uintptr, callback EventCallback) error {
	return setCallback(c, &c.procs, ph, context, callback)
}

// ---- The service ----

// GetServiceProperties implements API.
func (c *EmulatorClient) GetServiceProperties(propertyQuery string) (string, error) {
	f, err := c.roundTrip(wire.MethodGetServiceProperties, wire.QueryArgs{Query: propertyQuery}, nil)
	if f == nil {
		return "", err
	}
	return f.Result, err
}
