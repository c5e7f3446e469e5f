package wire

import (
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
)

// The fault control methods: they inject faults into the daemon's own calls, for tests and
// operators (`hcsemu fault`). They are served on the unix socket only, which only the daemon's
// owner can open; the TCP transport refuses them with E_ACCESSDENIED, so that the Wine
// stand-ins (or anyone who learns the TCP key) cannot stall, fail or crash anything. Faults
// name an operation by its short name (FaultOps) or by its wire method name.
const (
	MethodFaultStall      = "FaultStall"
	MethodFaultRelease    = "FaultRelease"
	MethodFaultFail       = "FaultFail"
	MethodFaultCrash      = "FaultCrash"
	MethodFaultDisconnect = "FaultDisconnect"
	MethodFaultDelay      = "FaultDelay"
	MethodFaultList       = "FaultList"
	MethodFaultClear      = "FaultClear"
)

// IsFaultMethod reports a fault control method: the fault injector never applies faults to one,
// and the TCP transport refuses them.
func IsFaultMethod(method string) bool { return strings.HasPrefix(method, "Fault") }

// FaultOps maps the short operation names of the fault methods to the wire methods they name.
var FaultOps = map[string]string{
	"create":             MethodCreateComputeSystem,
	"open":               MethodOpenComputeSystem,
	"close":              MethodCloseComputeSystem,
	"enumerate":          MethodEnumerateComputeSystems,
	"start":              MethodStartComputeSystem,
	"shutdown":           MethodShutDownComputeSystem,
	"terminate":          MethodTerminateComputeSystem,
	"pause":              MethodPauseComputeSystem,
	"resume":             MethodResumeComputeSystem,
	"properties":         MethodGetComputeSystemProperties,
	"modify":             MethodModifyComputeSystem,
	"create-process":     MethodCreateProcess,
	"open-process":       MethodOpenProcess,
	"close-process":      MethodCloseProcess,
	"terminate-process":  MethodTerminateProcess,
	"signal-process":     MethodSignalProcess,
	"process-properties": MethodGetProcessProperties,
	"modify-process":     MethodModifyProcess,
	"service-properties": MethodGetServiceProperties,
}

// FaultStallArgs are the args of MethodFaultStall: calls of Op wait until released, or for
// ForMs milliseconds when it is not 0, or until the caller cancels them.
type FaultStallArgs struct {
	Op    string `json:"op"`
	ForMs int64  `json:"forMs,omitempty"`
}

// FaultReleaseArgs are the args of MethodFaultRelease: the stall of Op ends, or every stall
// when Op is empty.
type FaultReleaseArgs struct {
	Op string `json:"op,omitempty"`
}

// FaultFailArgs are the args of MethodFaultFail: the next Count calls of Op (every call when
// Count is 0) fail with HResult without running.
type FaultFailArgs struct {
	Op      string              `json:"op"`
	HResult computecore.HRESULT `json:"hresult"`
	Count   int                 `json:"count,omitempty"`
}

// FaultCrashArgs are the args of MethodFaultCrash: the system stops at once with an
// UnexpectedExit notification and its processes are killed.
type FaultCrashArgs struct {
	System string `json:"system"`
}

// FaultDelayArgs are the args of MethodFaultDelay: every call waits DelayMs milliseconds
// before it runs (0 ends the delay).
type FaultDelayArgs struct {
	DelayMs int64 `json:"delayMs"`
}

// FaultArgs are the args of the methods that take none (list, clear, disconnect).
type FaultArgs struct{}

// FaultListReply is the reply of MethodFaultList (and of every fault method): the faults
// active once it has run.
type FaultListReply struct {
	Stalls  []FaultStall `json:"stalls,omitempty"`
	Fails   []FaultFail  `json:"fails,omitempty"`
	DelayMs int64        `json:"delayMs,omitempty"`
	// VMs are the utility VMs' faults (MethodFaultVM), by VM id.
	VMs []FaultVMArgs `json:"vms,omitempty"`
}

// FaultStall is an active stall; Waiting is how many calls it holds now.
type FaultStall struct {
	Op      string `json:"op"`
	Method  string `json:"method"`
	Until   string `json:"until,omitempty"` // RFC 3339, empty: until released
	Waiting int    `json:"waiting"`
}

// FaultFail is an active failure; Remaining is 0 for one that fails every call.
type FaultFail struct {
	Op        string              `json:"op"`
	Method    string              `json:"method"`
	HResult   computecore.HRESULT `json:"hresult"`
	Remaining int                 `json:"remaining,omitempty"`
}
