package computecore

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// New returns the computecore.dll bindings. It fails, rather than panicking later, when the DLL
// or one of its functions is missing (computecore.dll ships with Windows Server 2019 and later).
func New() (API, error) {
	if err := modcomputecore.Load(); err != nil {
		return nil, fmt.Errorf("load computecore.dll (the HCS API of Windows Server 2019 and later): %w", err)
	}
	for _, p := range []*windows.LazyProc{
		procHcsCreateOperation, procHcsCloseOperation, procHcsGetOperationContext, procHcsSetOperationContext,
		procHcsGetComputeSystemFromOperation, procHcsGetProcessFromOperation, procHcsGetOperationType,
		procHcsGetOperationId, procHcsGetOperationResult, procHcsGetOperationResultAndProcessInfo,
		procHcsWaitForOperationResult, procHcsWaitForOperationResultAndProcessInfo, procHcsCancelOperation,
		procHcsCreateComputeSystem, procHcsOpenComputeSystem, procHcsCloseComputeSystem,
		procHcsEnumerateComputeSystems, procHcsStartComputeSystem, procHcsShutDownComputeSystem,
		procHcsTerminateComputeSystem, procHcsPauseComputeSystem, procHcsResumeComputeSystem,
		procHcsGetComputeSystemProperties, procHcsModifyComputeSystem, procHcsWaitForComputeSystemExit,
		procHcsSetComputeSystemCallback, procHcsCreateProcess, procHcsOpenProcess, procHcsCloseProcess,
		procHcsTerminateProcess, procHcsSignalProcess, procHcsGetProcessInfo, procHcsGetProcessProperties,
		procHcsModifyProcess, procHcsWaitForProcessExit, procHcsSetProcessCallback, procHcsGetServiceProperties,
		procHcsModifyServiceSettings,
	} {
		if err := p.Find(); err != nil {
			return nil, fmt.Errorf("computecore.dll has no %s: %w", p.Name, err)
		}
	}
	return &dll{
		opKeys:     map[Operation]uintptr{},
		systemKeys: map[System][]uintptr{},
		procKeys:   map[Process][]uintptr{},
	}, nil
}

// dll implements API on computecore.dll. It remembers which callback registrations belong to
// which handle so that closing the handle releases them.
type dll struct {
	mu         sync.Mutex
	opKeys     map[Operation]uintptr
	systemKeys map[System][]uintptr
	procKeys   map[Process][]uintptr
}

var _ API = (*dll)(nil)

// hresult turns a returned HRESULT into nil or an HRESULT error.
func hresult(hr int32) error {
	if hr >= 0 {
		return nil
	}
	return HRESULT(uint32(hr))
}

// utf16 converts a required string argument. A string with a NUL cannot be passed to HCS.
func utf16(name, s string) (*uint16, error) {
	p, err := windows.UTF16PtrFromString(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", name, s, E_INVALIDARG)
	}
	return p, nil
}

// optUTF16 is utf16 for optional arguments, where "" means NULL.
func optUTF16(name, s string) (*uint16, error) {
	if s == "" {
		return nil, nil
	}
	return utf16(name, s)
}

// takeString copies a string HCS allocated for the caller and frees it with LocalFree, as the
// computecore documentation requires of every result document.
func takeString(p *uint16) string {
	if p == nil {
		return ""
	}
	s := windows.UTF16PtrToString(p)
	_, _ = windows.LocalFree(windows.Handle(unsafe.Pointer(p)))
	return s
}

func (d *dll) CreateOperation(context uintptr, callback EventCallback) (Operation, error) {
	key := register(callback, context)
	var cb uintptr
	if callback != nil {
		_, cb = trampolines()
	}
	op := hcsCreateOperation(key, cb)
	if op == 0 {
		unregister(key)
		return 0, fmt.Errorf("HcsCreateOperation: %w", E_OUTOFMEMORY)
	}
	d.mu.Lock()
	d.opKeys[op] = key
	d.mu.Unlock()
	return op, nil
}

func (d *dll) CloseOperation(op Operation) {
	hcsCloseOperation(op)
	d.mu.Lock()
	key, ok := d.opKeys[op]
	delete(d.opKeys, op)
	d.mu.Unlock()
	if ok {
		unregister(key)
	}
}

func (d *dll) GetOperationContext(op Operation) uintptr {
	r, ok := lookup(hcsGetOperationContext(op))
	if !ok {
		return 0
	}
	return r.context
}

func (d *dll) SetOperationContext(op Operation, context uintptr) error {
	key := hcsGetOperationContext(op)
	callbacksMu.Lock()
	defer callbacksMu.Unlock()
	r, ok := callbacks[key]
	if !ok {
		return fmt.Errorf("operation %#x was not created by this API: %w", uintptr(op), E_INVALIDARG)
	}
	r.context = context
	return nil
}

func (d *dll) GetComputeSystemFromOperation(op Operation) System {
	return hcsGetComputeSystemFromOperation(op)
}

func (d *dll) GetProcessFromOperation(op Operation) Process { return hcsGetProcessFromOperation(op) }

func (d *dll) GetOperationType(op Operation) OperationType {
	return OperationType(hcsGetOperationType(op))
}

func (d *dll) GetOperationId(op Operation) uint64 { return hcsGetOperationId(op) }

func (d *dll) GetOperationResult(op Operation) (string, error) {
	var doc *uint16
	hr := hcsGetOperationResult(op, &doc)
	return takeString(doc), hresult(hr)
}

func (d *dll) GetOperationResultAndProcessInfo(op Operation) (ProcessInformation, string, error) {
	var (
		info ProcessInformation
		doc  *uint16
	)
	hr := hcsGetOperationResultAndProcessInfo(op, &info, &doc)
	return info, takeString(doc), hresult(hr)
}

func (d *dll) WaitForOperationResult(op Operation, timeoutMs uint32) (string, error) {
	var doc *uint16
	hr := hcsWaitForOperationResult(op, timeoutMs, &doc)
	return takeString(doc), hresult(hr)
}

func (d *dll) WaitForOperationResultAndProcessInfo(op Operation, timeoutMs uint32) (ProcessInformation, string, error) {
	var (
		info ProcessInformation
		doc  *uint16
	)
	hr := hcsWaitForOperationResultAndProcessInfo(op, timeoutMs, &info, &doc)
	return info, takeString(doc), hresult(hr)
}

func (d *dll) CancelOperation(op Operation) error { return hresult(hcsCancelOperation(op)) }

func (d *dll) CreateComputeSystem(id, configuration string, op Operation, securityDescriptor uintptr) (System, error) {
	pid, err := utf16("id", id)
	if err != nil {
		return 0, err
	}
	pcfg, err := utf16("configuration", configuration)
	if err != nil {
		return 0, err
	}
	var cs System
	if err := hresult(hcsCreateComputeSystem(pid, pcfg, op, securityDescriptor, &cs)); err != nil {
		return 0, err
	}
	return cs, nil
}

func (d *dll) OpenComputeSystem(id string, requestedAccess uint32) (System, error) {
	pid, err := utf16("id", id)
	if err != nil {
		return 0, err
	}
	var cs System
	if err := hresult(hcsOpenComputeSystem(pid, requestedAccess, &cs)); err != nil {
		return 0, err
	}
	return cs, nil
}

// CloseComputeSystem closes the handle first: once HcsCloseComputeSystem returns, HCS makes no
// more callbacks for it, so its registrations can go.
func (d *dll) CloseComputeSystem(cs System) {
	hcsCloseComputeSystem(cs)
	releaseCallbacks(d, d.systemKeys, cs)
}

func (d *dll) EnumerateComputeSystems(query string, op Operation) error {
	pq, err := optUTF16("query", query)
	if err != nil {
		return err
	}
	return hresult(hcsEnumerateComputeSystems(pq, op))
}

// systemCall runs one of the HcsXxxComputeSystem(cs, op, options) functions.
func systemCall(f func(System, Operation, *uint16) int32, cs System, op Operation, options string) error {
	po, err := optUTF16("options", options)
	if err != nil {
		return err
	}
	return hresult(f(cs, op, po))
}

func (d *dll) StartComputeSystem(cs System, op Operation, options string) error {
	return systemCall(hcsStartComputeSystem, cs, op, options)
}

func (d *dll) ShutDownComputeSystem(cs System, op Operation, options string) error {
	return systemCall(hcsShutDownComputeSystem, cs, op, options)
}

func (d *dll) TerminateComputeSystem(cs System, op Operation, options string) error {
	return systemCall(hcsTerminateComputeSystem, cs, op, options)
}

func (d *dll) PauseComputeSystem(cs System, op Operation, options string) error {
	return systemCall(hcsPauseComputeSystem, cs, op, options)
}

func (d *dll) ResumeComputeSystem(cs System, op Operation, options string) error {
	return systemCall(hcsResumeComputeSystem, cs, op, options)
}

func (d *dll) GetComputeSystemProperties(cs System, op Operation, propertyQuery string) error {
	return systemCall(hcsGetComputeSystemProperties, cs, op, propertyQuery)
}

func (d *dll) ModifyComputeSystem(cs System, op Operation, configuration string, identity uintptr) error {
	pc, err := utf16("configuration", configuration)
	if err != nil {
		return err
	}
	return hresult(hcsModifyComputeSystem(cs, op, pc, identity))
}

func (d *dll) WaitForComputeSystemExit(cs System, timeoutMs uint32) (string, error) {
	var doc *uint16
	hr := hcsWaitForComputeSystemExit(cs, timeoutMs, &doc)
	return takeString(doc), hresult(hr)
}

func (d *dll) SetComputeSystemCallback(cs System, options EventOptions, context uintptr, callback EventCallback) error {
	return setCallback(d, d.systemKeys, cs, context, callback, func(key, cb uintptr) int32 {
		return hcsSetComputeSystemCallback(cs, options, key, cb)
	})
}

func (d *dll) CreateProcess(cs System, processParameters string, op Operation, securityDescriptor uintptr) (Process, error) {
	pp, err := utf16("processParameters", processParameters)
	if err != nil {
		return 0, err
	}
	var p Process
	if err := hresult(hcsCreateProcess(cs, pp, op, securityDescriptor, &p)); err != nil {
		return 0, err
	}
	return p, nil
}

func (d *dll) OpenProcess(cs System, processID uint32, requestedAccess uint32) (Process, error) {
	var p Process
	if err := hresult(hcsOpenProcess(cs, processID, requestedAccess, &p)); err != nil {
		return 0, err
	}
	return p, nil
}

func (d *dll) CloseProcess(p Process) {
	hcsCloseProcess(p)
	releaseCallbacks(d, d.procKeys, p)
}

// processCall runs one of the HcsXxxProcess(p, op, options) functions.
func processCall(f func(Process, Operation, *uint16) int32, p Process, op Operation, options string) error {
	po, err := optUTF16("options", options)
	if err != nil {
		return err
	}
	return hresult(f(p, op, po))
}

func (d *dll) TerminateProcess(p Process, op Operation, options string) error {
	return processCall(hcsTerminateProcess, p, op, options)
}

func (d *dll) SignalProcess(p Process, op Operation, options string) error {
	return processCall(hcsSignalProcess, p, op, options)
}

func (d *dll) GetProcessInfo(p Process, op Operation) error {
	return hresult(hcsGetProcessInfo(p, op))
}

func (d *dll) GetProcessProperties(p Process, op Operation, propertyQuery string) error {
	return processCall(hcsGetProcessProperties, p, op, propertyQuery)
}

func (d *dll) ModifyProcess(p Process, op Operation, settings string) error {
	ps, err := utf16("settings", settings)
	if err != nil {
		return err
	}
	return hresult(hcsModifyProcess(p, op, ps))
}

func (d *dll) WaitForProcessExit(p Process, timeoutMs uint32) (string, error) {
	var doc *uint16
	hr := hcsWaitForProcessExit(p, timeoutMs, &doc)
	return takeString(doc), hresult(hr)
}

func (d *dll) SetProcessCallback(p Process, options EventOptions, context uintptr, callback EventCallback) error {
	return setCallback(d, d.procKeys, p, context, callback, func(key, cb uintptr) int32 {
		return hcsSetProcessCallback(p, options, key, cb)
	})
}

// setCallback registers callback under a new registry key, passes the key and the event
// trampoline to set (HcsSetComputeSystemCallback or HcsSetProcessCallback for handle h), and
// remembers the key with h in keys (d.systemKeys or d.procKeys) so that closing h releases it.
func setCallback[H comparable](d *dll, keys map[H][]uintptr, h H, context uintptr, callback EventCallback, set func(key, cb uintptr) int32) error {
	key := register(callback, context)
	var cb uintptr
	if callback != nil {
		cb, _ = trampolines()
	}
	if err := hresult(set(key, cb)); err != nil {
		unregister(key)
		return err
	}
	d.mu.Lock()
	keys[h] = append(keys[h], key)
	d.mu.Unlock()
	return nil
}

// releaseCallbacks forgets the registry keys of handle h, which its Close just closed: once
// HcsClose… returns, HCS makes no more callbacks for it.
func releaseCallbacks[H comparable](d *dll, keys map[H][]uintptr, h H) {
	d.mu.Lock()
	ks := keys[h]
	delete(keys, h)
	d.mu.Unlock()
	unregister(ks...)
}

func (d *dll) GetServiceProperties(propertyQuery string) (string, error) {
	pq, err := optUTF16("propertyQuery", propertyQuery)
	if err != nil {
		return "", err
	}
	var doc *uint16
	hr := hcsGetServiceProperties(pq, &doc)
	return takeString(doc), hresult(hr)
}

func (d *dll) ModifyServiceSettings(settings string) (string, error) {
	s, err := utf16("settings", settings)
	if err != nil {
		return "", err
	}
	var doc *uint16
	hr := hcsModifyServiceSettings(s, &doc)
	return takeString(doc), hresult(hr)
}
