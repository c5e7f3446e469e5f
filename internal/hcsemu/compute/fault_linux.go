package compute

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// faults is the engine's fault injector (issue 15): stalls, failures and a delay that apply to
// wire methods before they run, set through the fault methods (methods_fault_linux.go) on the
// unix socket. Every request passes through before in the dispatcher, so a fault applies to any
// method. Its lock is never held while a call waits. The zero value injects nothing.
type faults struct {
	mu     sync.Mutex
	stalls map[string]*stall // by wire method
	fails  map[string]*fail  // by wire method
	delay  time.Duration
	// conns are the connections served now, closed by disconnect; by Subscriber, the connection.
	conns map[Subscriber]func()
	// served is the engine's dispatch table (dispatch_linux.go): the wire methods a fault may
	// name besides the FaultOps short names.
	served map[string]dispatch.Method
}

type stall struct {
	op       string
	until    time.Time // zero: until released
	released chan struct{}
	waiting  int
}

type fail struct {
	op        string
	hr        computecore.HRESULT
	remaining int // 0: every call
}

// faultMethod resolves an operation name (a FaultOps short name or a wire method name) to the
// wire method it names.
func (fs *faults) faultMethod(op string) (string, error) {
	if m, ok := wire.FaultOps[strings.ToLower(op)]; ok {
		return m, nil
	}
	if _, ok := fs.served[op]; ok && !wire.IsFaultMethod(op) {
		return op, nil
	}
	names := make([]string, 0, len(wire.FaultOps))
	for n := range wire.FaultOps {
		names = append(names, n)
	}
	sort.Strings(names)
	return "", hresult.Errorf(computecore.E_INVALIDARG, "fault: unknown operation %q: want one of %s or a wire method name", op, strings.Join(names, ", "))
}

// before applies the active faults to a call of method: it waits out the delay and any stall
// (returning early with an error naming the method when ctx ends), then fails the call if a
// failure is set for it.
func (fs *faults) before(ctx context.Context, method string) error {
	if wire.IsFaultMethod(method) {
		return nil
	}
	fs.mu.Lock()
	delay := fs.delay
	st := fs.stalls[method]
	if st != nil {
		st.waiting++
	}
	fs.mu.Unlock()

	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			fs.unwait(st)
			return hresult.Errorf(computecore.E_CANCELLED, "%s: cancelled during an injected delay: %v", method, ctx.Err())
		}
	}
	if st != nil {
		log.G(ctx).WithField("method", method).Info("hcsemu: call stalled by fault injection")
		var timeout <-chan time.Time
		if !st.until.IsZero() {
			t := time.NewTimer(time.Until(st.until))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-st.released:
		case <-timeout:
		case <-ctx.Done():
			fs.unwait(st)
			return hresult.Errorf(computecore.E_CANCELLED, "%s: cancelled while stalled by fault injection: %v", method, ctx.Err())
		}
		fs.unwait(st)
	}

	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.fails[method]
	if f == nil {
		return nil
	}
	if f.remaining > 0 {
		f.remaining--
		if f.remaining == 0 {
			delete(fs.fails, method)
		}
	}
	return hresult.Errorf(f.hr, "%s: failed by fault injection", method)
}

func (fs *faults) unwait(st *stall) {
	if st == nil {
		return
	}
	fs.mu.Lock()
	st.waiting--
	fs.mu.Unlock()
}

// setStall stalls calls of op, for d when it is not 0. A stall of the same op replaces the
// previous one, which releases its calls.
func (fs *faults) setStall(op string, d time.Duration) error {
	m, err := fs.faultMethod(op)
	if err != nil {
		return err
	}
	if d < 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: stall %s: negative duration %v", op, d)
	}
	st := &stall{op: op, released: make(chan struct{})}
	if d > 0 {
		st.until = time.Now().Add(d)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.stalls == nil {
		fs.stalls = map[string]*stall{}
	}
	if old := fs.stalls[m]; old != nil {
		close(old.released)
	}
	fs.stalls[m] = st
	return nil
}

// release ends the stall of op, or every stall when op is empty.
func (fs *faults) release(op string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if op == "" {
		for m, st := range fs.stalls {
			close(st.released)
			delete(fs.stalls, m)
		}
		return nil
	}
	m, err := fs.faultMethod(op)
	if err != nil {
		return err
	}
	st := fs.stalls[m]
	if st == nil {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: release %s: no stall of %s is active", op, m)
	}
	close(st.released)
	delete(fs.stalls, m)
	return nil
}

// setFail makes the next count calls of op (every call when count is 0) fail with hr.
func (fs *faults) setFail(op string, hr computecore.HRESULT, count int) error {
	m, err := fs.faultMethod(op)
	if err != nil {
		return err
	}
	if hr == 0 || int32(hr) >= 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: fail %s: HRESULT %#x is not a failure", op, uint32(hr))
	}
	if count < 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: fail %s: negative count %d", op, count)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.fails == nil {
		fs.fails = map[string]*fail{}
	}
	fs.fails[m] = &fail{op: op, hr: hr, remaining: count}
	return nil
}

func (fs *faults) setDelay(d time.Duration) error {
	if d < 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: delay: negative duration %v", d)
	}
	fs.mu.Lock()
	fs.delay = d
	fs.mu.Unlock()
	return nil
}

// clear ends every fault: stalled calls proceed.
func (fs *faults) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for m, st := range fs.stalls {
		close(st.released)
		delete(fs.stalls, m)
	}
	fs.fails = nil
	fs.delay = 0
}

// list reports the active faults; a timed stall that has run out is dropped.
func (fs *faults) list() wire.FaultListReply {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var r wire.FaultListReply
	now := time.Now()
	for m, st := range fs.stalls {
		if !st.until.IsZero() && !now.Before(st.until) {
			close(st.released)
			delete(fs.stalls, m)
			continue
		}
		s := wire.FaultStall{Op: st.op, Method: m, Waiting: st.waiting}
		if !st.until.IsZero() {
			s.Until = st.until.UTC().Format(time.RFC3339Nano)
		}
		r.Stalls = append(r.Stalls, s)
	}
	for m, f := range fs.fails {
		r.Fails = append(r.Fails, wire.FaultFail{Op: f.op, Method: m, HResult: f.hr, Remaining: f.remaining})
	}
	sort.Slice(r.Stalls, func(i, j int) bool { return r.Stalls[i].Method < r.Stalls[j].Method })
	sort.Slice(r.Fails, func(i, j int) bool { return r.Fails[i].Method < r.Fails[j].Method })
	r.DelayMs = fs.delay.Milliseconds()
	return r
}

// track registers a served connection for disconnect; untrack forgets it.
func (fs *faults) track(sub Subscriber, drop func()) (untrack func()) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.conns == nil {
		fs.conns = map[Subscriber]func(){}
	}
	fs.conns[sub] = drop
	return func() {
		fs.mu.Lock()
		delete(fs.conns, sub)
		fs.mu.Unlock()
	}
}

// disconnect drops every connection but except (the one that asked), as if the service had
// restarted for its clients; it returns how many it dropped.
func (fs *faults) disconnect(except Subscriber) int {
	fs.mu.Lock()
	var drops []func()
	for sub, drop := range fs.conns {
		if sub != except {
			drops = append(drops, drop)
		}
	}
	fs.mu.Unlock()
	for _, drop := range drops {
		drop()
	}
	return len(drops)
}

// Crash stops a running or paused system as if it had failed: UnexpectedExit, its processes
// killed, its holders told, as when a utility VM dies on Windows.
func (e *Engine) Crash(ctx context.Context, id string) error {
	s, err := e.lookup(wire.SystemRef{ID: id})
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.state == schema2.StateStopped {
		return hresult.Errorf(computecore.HCS_E_INVALID_STATE, "fault: crash %q: the compute system is already stopped", id)
	}
	s.stopLocked(ctx, schema2.NotificationUnexpectedExit)
	log.G(ctx).WithField("system", id).Warn("hcsemu: compute system crashed by fault injection")
	return nil
}

// systemCount is how many compute systems exist, for tests.
func (e *Engine) systemCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.systems)
}
