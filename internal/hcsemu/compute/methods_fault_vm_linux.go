package compute

import (
	"context"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// faultVMMethods are the fault methods of utility VMs (fault_vm_linux.go).
var faultVMMethods = map[string]method{
	wire.MethodFaultVM: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultVMArgs) (dispatch.Answer, error) {
		return e.faultList(e.vmFaults.set(a.System, time.Duration(a.BootDelayMs)*time.Millisecond, a.GuestHResult))
	}),
}
