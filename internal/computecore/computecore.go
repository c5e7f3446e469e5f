// Package computecore is the surface of the Host Compute Service C API (computecore.dll) that
// runhcs uses, as one Go interface, API, whose methods map one to one to computecore.dll
// functions (https://learn.microsoft.com/virtualization/api/hcs/reference/apioverview).
//
// On Windows, New returns bindings to computecore.dll generated with mkwinsyscall. The other
// implementation, a client of the hcsemu daemon for Linux builds, lives in the emulator's tree
// (internal/hcsemu/client); internal/hcs chooses between them, so nothing above it knows which
// one it talks to. This package imports nothing of runhcs's: it is the bare API surface, and
// the emulator's wire protocol imports it for HRESULT and EventType.
//
// The API keeps HCS's shape on purpose: handles are opaque, documents are JSON strings, results
// are HRESULTs (returned as HRESULT errors), and operations are created, passed to a call and
// waited on. Typed, context-bounded wrappers live in internal/hcs.
package computecore

import "fmt"

// Handles are opaque values owned by the implementation: HCS_OPERATION, HCS_SYSTEM and
// HCS_PROCESS on Windows, table keys in the emulator client.
type (
	Operation uintptr
	System    uintptr
	Process   uintptr
)

// Infinite is the timeout (in milliseconds) that waits without a bound, as INFINITE in Win32.
const Infinite = 0xFFFFFFFF

// ProcessInformation is HCS_PROCESS_INFORMATION. The std handles are Windows HANDLEs on Windows
// and file descriptors under the emulator; both can be wrapped with os.NewFile. A handle is 0
// when the process was created without that stream. The caller owns them.
type ProcessInformation struct {
	ProcessID uint32
	Reserved  uint32
	StdInput  uintptr
	StdOutput uintptr
	StdError  uintptr
}

// EventType is HCS_EVENT_TYPE.
type EventType uint32

// The HCS_EVENT_TYPE values, as computecore.h defines them.
const (
	EventInvalid                           EventType = 0x00000000
	EventSystemExited                      EventType = 0x00000001
	EventSystemCrashInitiated              EventType = 0x00000002
	EventSystemCrashReport                 EventType = 0x00000003
	EventSystemRdpEnhancedModeStateChanged EventType = 0x00000004
	EventSystemSiloJobCreated              EventType = 0x00000005
	EventSystemGuestConnectionClosed       EventType = 0x00000006
	EventProcessExited                     EventType = 0x00010000
	EventOperationCallback                 EventType = 0x01000000
	EventServiceDisconnect                 EventType = 0x02000000
)

func (t EventType) String() string {
	switch t {
	case EventSystemExited:
		return "SystemExited"
	case EventSystemCrashInitiated:
		return "SystemCrashInitiated"
	case EventSystemCrashReport:
		return "SystemCrashReport"
	case EventSystemRdpEnhancedModeStateChanged:
		return "SystemRdpEnhancedModeStateChanged"
	case EventSystemSiloJobCreated:
		return "SystemSiloJobCreated"
	case EventSystemGuestConnectionClosed:
		return "SystemGuestConnectionClosed"
	case EventProcessExited:
		return "ProcessExited"
	case EventOperationCallback:
		return "OperationCallback"
	case EventServiceDisconnect:
		return "ServiceDisconnect"
	}
	return fmt.Sprintf("EventType(%#x)", uint32(t))
}

// Event is HCS_EVENT: its type, a JSON document whose shape depends on the type (for
// EventProcessExited: {"Status":…,"ExitCode":…}; for EventSystemExited: a SystemExitStatus),
// and the operation it concerns, if any.
type Event struct {
	Type      EventType
	EventData string
	Operation Operation
}

// EventOptions is HCS_EVENT_OPTIONS.
type EventOptions uint32

const (
	EventOptionNone                     EventOptions = 0
	EventOptionEnableOperationCallbacks EventOptions = 1
)

// EventCallback is HCS_EVENT_CALLBACK. It is called on a thread of the implementation's, one
// event at a time per handle, and must not block for long.
type EventCallback func(event Event, context uintptr)

// Access rights passed to OpenComputeSystem and OpenProcess (GENERIC_ALL is what hcsshim asks for).
const GenericAll = 0x10000000

// API is computecore.dll. Every method's name is the C function's without the "Hcs" prefix; the
// parameters are the C function's, with out-parameters turned into results and PCWSTR into
// string. Every error is an HRESULT error (see HRESULT) unless the implementation itself failed,
// for instance because the service is not reachable.
type API interface {
	// Operations.
	CreateOperation(context uintptr, callback EventCallback) (Operation, error)
	CloseOperation(op Operation)
	GetOperationContext(op Operation) uintptr
	SetOperationContext(op Operation, context uintptr) error
	GetComputeSystemFromOperation(op Operation) System
	GetProcessFromOperation(op Operation) Process
	GetOperationType(op Operation) OperationType
	GetOperationId(op Operation) uint64
	GetOperationResult(op Operation) (resultDocument string, err error)
	GetOperationResultAndProcessInfo(op Operation) (ProcessInformation, string, error)
	WaitForOperationResult(op Operation, timeoutMs uint32) (resultDocument string, err error)
	WaitForOperationResultAndProcessInfo(op Operation, timeoutMs uint32) (ProcessInformation, string, error)
	CancelOperation(op Operation) error

	// Compute systems.
	CreateComputeSystem(id string, configuration string, op Operation, securityDescriptor uintptr) (System, error)
	OpenComputeSystem(id string, requestedAccess uint32) (System, error)
	CloseComputeSystem(cs System)
	EnumerateComputeSystems(query string, op Operation) error
	StartComputeSystem(cs System, op Operation, options string) error
	ShutDownComputeSystem(cs System, op Operation, options string) error
	TerminateComputeSystem(cs System, op Operation, options string) error
	PauseComputeSystem(cs System, op Operation, options string) error
	ResumeComputeSystem(cs System, op Operation, options string) error
	GetComputeSystemProperties(cs System, op Operation, propertyQuery string) error
	ModifyComputeSystem(cs System, op Operation, configuration string, identity uintptr) error
	WaitForComputeSystemExit(cs System, timeoutMs uint32) (resultDocument string, err error)
	SetComputeSystemCallback(cs System, options EventOptions, context uintptr, callback EventCallback) error

	// Processes.
	CreateProcess(cs System, processParameters string, op Operation, securityDescriptor uintptr) (Process, error)
	OpenProcess(cs System, processID uint32, requestedAccess uint32) (Process, error)
	CloseProcess(p Process)
	TerminateProcess(p Process, op Operation, options string) error
	SignalProcess(p Process, op Operation, options string) error
	GetProcessInfo(p Process, op Operation) error
	GetProcessProperties(p Process, op Operation, propertyQuery string) error
	ModifyProcess(p Process, op Operation, settings string) error
	WaitForProcessExit(p Process, timeoutMs uint32) (resultDocument string, err error)
	SetProcessCallback(p Process, options EventOptions, context uintptr, callback EventCallback) error

	// The service.
	GetServiceProperties(propertyQuery string) (result string, err error)
	// ModifyServiceSettings is HcsModifyServiceSettings: settings is a ModificationRequest
	// (PropertyType and Settings); result, on failure, may hold a ResultError document.
	ModifyServiceSettings(settings string) (result string, err error)
}

// OperationType is HCS_OPERATION_TYPE.
type OperationType int32

// The HCS_OPERATION_TYPE values, as computecore.h defines them.
const (
	OperationTypeNone                 OperationType = -1
	OperationTypeEnumerate            OperationType = 0
	OperationTypeCreate               OperationType = 1
	OperationTypeStart                OperationType = 2
	OperationTypeShutdown             OperationType = 3
	OperationTypePause                OperationType = 4
	OperationTypeResume               OperationType = 5
	OperationTypeSave                 OperationType = 6
	OperationTypeTerminate            OperationType = 7
	OperationTypeModify               OperationType = 8
	OperationTypeGetProperties        OperationType = 9
	OperationTypeCreateProcess        OperationType = 10
	OperationTypeSignalProcess        OperationType = 11
	OperationTypeGetProcessInfo       OperationType = 12
	OperationTypeGetProcessProperties OperationType = 13
	OperationTypeModifyProcess        OperationType = 14
	OperationTypeCrash                OperationType = 15
)
