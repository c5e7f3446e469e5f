package hcsemu

import (
	"context"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The fault control methods (wire/fault.go), served by the Engine's injector (fault_linux.go).
// The dispatcher refuses them on TCP and never applies faults to them. Each answers with the
// faults active once it has run.

func init() { addMethods(faultMethods) }

var faultMethods = map[string]method{
	wire.MethodFaultStall: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultStallArgs) (answer, error) {
		return e.faultList(e.faults.setStall(a.Op, time.Duration(a.ForMs)*time.Millisecond))
	}),
	wire.MethodFaultRelease: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultReleaseArgs) (answer, error) {
		return e.faultList(e.faults.release(a.Op))
	}),
	wire.MethodFaultFail: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultFailArgs) (answer, error) {
		return e.faultList(e.faults.setFail(a.Op, a.HResult, a.Count))
	}),
	wire.MethodFaultDelay: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultDelayArgs) (answer, error) {
		return e.faultList(e.faults.setDelay(time.Duration(a.DelayMs) * time.Millisecond))
	}),
	wire.MethodFaultCrash: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.FaultCrashArgs) (answer, error) {
		return e.faultList(e.Crash(ctx, a.System))
	}),
	wire.MethodFaultDisconnect: withArgs(func(_ context.Context, e *Engine, sub Subscriber, _ wire.FaultArgs) (answer, error) {
		e.faults.disconnect(sub)
		return e.faultList(nil)
	}),
	wire.MethodFaultList: withArgs(func(_ context.Context, e *Engine, _ Subscriber, _ wire.FaultArgs) (answer, error) {
		return e.faultList(nil)
	}),
	wire.MethodFaultClear: withArgs(func(_ context.Context, e *Engine, _ Subscriber, _ wire.FaultArgs) (answer, error) {
		e.faults.clear()
		e.vmFaults.clearAll()
		return e.faultList(nil)
	}),
}

// faultList answers a fault method: err, or the faults now active.
func (e *Engine) faultList(err error) (answer, error) {
	if err != nil {
		return answer{}, err
	}
	r := e.faults.list()
	r.VMs = e.vmFaults.list()
	return answer{reply: r}, nil
}
