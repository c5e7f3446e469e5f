package hcs

import (
	"sync"

	"github.com/openhcs/runhcs/internal/computecore"
)

// fakeAPI is an in-memory computecore.API for unit tests. Every operation completes at once
// with the outcome set in results (by call name, such as "StartComputeSystem"), except the
// calls named in hang, whose operations complete only when cancelled.
type fakeAPI struct {
	client *Client // a Client of this fake (useFake)

	mu      sync.Mutex
	next    uintptr
	ops     map[computecore.Operation]*fakeOp
	systems map[computecore.System]string
	procs   map[computecore.Process]uint32
	sysCB   map[computecore.System]fakeCB
	procCB  map[computecore.Process]fakeCB

	results   map[string]fakeResult
	hang      map[string]bool
	cancelled []uint64 // ids of cancelled operations
	closedOps []uint64
	closedSys []computecore.System
	service   string
}

type fakeResult struct {
	doc  string
	err  error
	info computecore.ProcessInformation
	// syncErr is returned by the call itself instead of through the operation.
	syncErr error
}

type fakeOp struct {
	id   uint64
	done chan struct{}
	res  fakeResult
}

type fakeCB struct {
	fn  computecore.EventCallback
	ctx uintptr
}

func newFake() *fakeAPI {
	return &fakeAPI{
		next:    100,
		ops:     map[computecore.Operation]*fakeOp{},
		systems: map[computecore.System]string{},
		procs:   map[computecore.Process]uint32{},
		sysCB:   map[computecore.System]fakeCB{},
		procCB:  map[computecore.Process]fakeCB{},
		results: map[string]fakeResult{},
		hang:    map[string]bool{},
	}
}

func (f *fakeAPI) handle() uintptr { f.next++; return f.next }

// do runs the call name on op: records its outcome, or leaves it hanging.
func (f *fakeAPI) do(name string, op computecore.Operation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.results[name]
	if r.syncErr != nil {
		return r.syncErr
	}
	o := f.ops[op]
	o.res = r
	if !f.hang[name] {
		close(o.done)
	}
	return nil
}

// fire delivers an event to the callback of a system or process handle.
func (f *fakeAPI) fireSystem(cs computecore.System, ev computecore.Event) {
	f.mu.Lock()
	cb := f.sysCB[cs]
	f.mu.Unlock()
	cb.fn(ev, cb.ctx)
}

func (f *fakeAPI) fireProcess(p computecore.Process, ev computecore.Event) {
	f.mu.Lock()
	cb := f.procCB[p]
	f.mu.Unlock()
	cb.fn(ev, cb.ctx)
}

func (f *fakeAPI) CreateOperation(uintptr, computecore.EventCallback) (computecore.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op := computecore.Operation(f.handle())
	f.ops[op] = &fakeOp{id: uint64(op), done: make(chan struct{})}
	return op, nil
}

func (f *fakeAPI) CloseOperation(op computecore.Operation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedOps = append(f.closedOps, uint64(op))
	delete(f.ops, op)
}

func (f *fakeAPI) GetOperationContext(computecore.Operation) uintptr        { return 0 }
func (f *fakeAPI) SetOperationContext(computecore.Operation, uintptr) error { return nil }
func (f *fakeAPI) GetComputeSystemFromOperation(computecore.Operation) computecore.System {
	return 0
}
func (f *fakeAPI) GetProcessFromOperation(computecore.Operation) computecore.Process { return 0 }
func (f *fakeAPI) GetOperationType(computecore.Operation) computecore.OperationType {
	return computecore.OperationTypeNone
}
func (f *fakeAPI) GetOperationId(op computecore.Operation) uint64 { return uint64(op) }

func (f *fakeAPI) GetOperationResult(op computecore.Operation) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.ops[op]
	select {
	case <-o.done:
		return o.res.doc, o.res.err
	default:
		return "", computecore.HCS_E_OPERATION_PENDING
	}
}

func (f *fakeAPI) GetOperationResultAndProcessInfo(op computecore.Operation) (computecore.ProcessInformation, string, error) {
	doc, err := f.GetOperationResult(op)
	return computecore.ProcessInformation{}, doc, err
}

func (f *fakeAPI) WaitForOperationResultAndProcessInfo(op computecore.Operation, _ uint32) (computecore.ProcessInformation, string, error) {
	f.mu.Lock()
	o := f.ops[op]
	f.mu.Unlock()
	<-o.done
	return o.res.info, o.res.doc, o.res.err
}

func (f *fakeAPI) WaitForOperationResult(op computecore.Operation, t uint32) (string, error) {
	_, doc, err := f.WaitForOperationResultAndProcessInfo(op, t)
	return doc, err
}

func (f *fakeAPI) CancelOperation(op computecore.Operation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.ops[op]
	f.cancelled = append(f.cancelled, o.id)
	select {
	case <-o.done:
	default:
		o.res = fakeResult{err: computecore.HCS_E_OPERATION_ALREADY_CANCELLED}
		close(o.done)
	}
	return nil
}

func (f *fakeAPI) CreateComputeSystem(id, _ string, op computecore.Operation, _ uintptr) (computecore.System, error) {
	if err := f.do("CreateComputeSystem", op); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := computecore.System(f.handle())
	f.systems[cs] = id
	return cs, nil
}

func (f *fakeAPI) OpenComputeSystem(id string, _ uint32) (computecore.System, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.results["OpenComputeSystem"]; r.syncErr != nil {
		return 0, r.syncErr
	}
	cs := computecore.System(f.handle())
	f.systems[cs] = id
	return cs, nil
}

func (f *fakeAPI) CloseComputeSystem(cs computecore.System) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedSys = append(f.closedSys, cs)
	delete(f.systems, cs)
}

func (f *fakeAPI) EnumerateComputeSystems(_ string, op computecore.Operation) error {
	return f.do("EnumerateComputeSystems", op)
}
func (f *fakeAPI) StartComputeSystem(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("StartComputeSystem", op)
}
func (f *fakeAPI) ShutDownComputeSystem(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("ShutDownComputeSystem", op)
}
func (f *fakeAPI) TerminateComputeSystem(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("TerminateComputeSystem", op)
}
func (f *fakeAPI) PauseComputeSystem(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("PauseComputeSystem", op)
}
func (f *fakeAPI) ResumeComputeSystem(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("ResumeComputeSystem", op)
}
func (f *fakeAPI) GetComputeSystemProperties(_ computecore.System, op computecore.Operation, _ string) error {
	return f.do("GetComputeSystemProperties", op)
}
func (f *fakeAPI) ModifyComputeSystem(_ computecore.System, op computecore.Operation, _ string, _ uintptr) error {
	return f.do("ModifyComputeSystem", op)
}
func (f *fakeAPI) WaitForComputeSystemExit(computecore.System, uint32) (string, error) {
	select {}
}

func (f *fakeAPI) SetComputeSystemCallback(cs computecore.System, _ computecore.EventOptions, ctx uintptr, cb computecore.EventCallback) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sysCB[cs] = fakeCB{cb, ctx}
	return nil
}

func (f *fakeAPI) CreateProcess(_ computecore.System, _ string, op computecore.Operation, _ uintptr) (computecore.Process, error) {
	if err := f.do("CreateProcess", op); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := computecore.Process(f.handle())
	f.procs[p] = f.ops[op].res.info.ProcessID
	return p, nil
}

func (f *fakeAPI) OpenProcess(_ computecore.System, pid uint32, _ uint32) (computecore.Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.results["OpenProcess"]; r.syncErr != nil {
		return 0, r.syncErr
	}
	p := computecore.Process(f.handle())
	f.procs[p] = pid
	return p, nil
}

func (f *fakeAPI) CloseProcess(p computecore.Process) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.procs, p)
}
func (f *fakeAPI) TerminateProcess(_ computecore.Process, op computecore.Operation, _ string) error {
	return f.do("TerminateProcess", op)
}
func (f *fakeAPI) SignalProcess(_ computecore.Process, op computecore.Operation, _ string) error {
	return f.do("SignalProcess", op)
}
func (f *fakeAPI) GetProcessInfo(_ computecore.Process, op computecore.Operation) error {
	return f.do("GetProcessInfo", op)
}
func (f *fakeAPI) GetProcessProperties(_ computecore.Process, op computecore.Operation, _ string) error {
	return f.do("GetProcessProperties", op)
}
func (f *fakeAPI) ModifyProcess(_ computecore.Process, op computecore.Operation, _ string) error {
	return f.do("ModifyProcess", op)
}
func (f *fakeAPI) WaitForProcessExit(computecore.Process, uint32) (string, error) { select {} }

func (f *fakeAPI) SetProcessCallback(p computecore.Process, _ computecore.EventOptions, ctx uintptr, cb computecore.EventCallback) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procCB[p] = fakeCB{cb, ctx}
	return nil
}

func (f *fakeAPI) GetServiceProperties(string) (string, error)  { return f.service, nil }
func (f *fakeAPI) ModifyServiceSettings(string) (string, error) { return "", computecore.E_NOTIMPL }

var _ computecore.API = (*fakeAPI)(nil)
