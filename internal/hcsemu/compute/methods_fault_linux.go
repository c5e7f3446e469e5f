package compute

import (
	"context"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The fault control methods (wire/fault.go), served by the Engine's injector (fault_linux.go).
// The dispatcher refuses them on TCP and never applies faults to them. Each answers with the
// faults active once it has run.

var faultMethods = map[string]method{
	wire.MethodFaultStall: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultStallArgs) (dispatch.Answer, error) {
		return e.faultList(e.faults.setStall(a.Op, time.Duration(a.ForMs)*time.Millisecond))
	}),
	wire.MethodFaultRelease: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultReleaseArgs) (dispatch.Answer, error) {
		return e.faultList(e.faults.release(a.Op))
	}),
	wire.MethodFaultFail: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultFailArgs) (dispatch.Answer, error) {
		return e.faultList(e.faults.setFail(a.Op, a.HResult, a.Count))
	}),
	wire.MethodFaultDelay: withArgs(func(_ context.Context, e *Engine, _ Subscriber, a wire.FaultDelayArgs) (dispatch.Answer, error) {
		return e.faultList(e.faults.setDelay(time.Duration(a.DelayMs) * time.Millisecond))
	}),
	wire.MethodFaultCrash: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.FaultCrashArgs) (dispatch.Answer, error) {
		return e.faultList(e.Crash(ctx, a.System))
	}),
	wire.MethodFaultDisconnect: withArgs(func(_ context.Context, e *Engine, sub Subscriber, _ wire.FaultArgs) (dispatch.Answer, error) {
		e.faults.disconnect(sub)
		return e.faultList(nil)
	}),
	wire.MethodFaultList: withArgs(func(_ context.Context, e *Engine, _ Subscriber, _ wire.FaultArgs) (dispatch.Answer, error) {
		return e.faultList(nil)
	}),
	wire.MethodFaultClear: withArgs(func(_ context.Context, e *Engine, _ Subscriber, _ wire.FaultArgs) (dispatch.Answer, error) {
		e.faults.clear()
		e.vmFaults.clearAll()
		return e.faultList(nil)
	}),
}

// faultList answers a fault method: err, or the faults now active.
func (e *Engine) faultList(err error) (dispatch.Answer, error) {
	if err != nil {
		return dispatch.Answer{}, err
	}
	r := e.faults.list()
	r.VMs = e.vmFaults.list()
	return dispatch.Answer{Reply: r}, nil
}
