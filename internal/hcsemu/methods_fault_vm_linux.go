package hcsemu

import (
	"context"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

func init() {
	addMethods(map[string]method{
		wire.MethodFaultVM: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultVMArgs) (answer, error) {
			return e.faultList(e.vmFaults.set(a.System, time.Duration(a.BootDelayMs)*time.Millisecond, a.GuestHResult))
		}),
	})
}
