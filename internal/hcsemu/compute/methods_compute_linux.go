package compute

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of compute systems and their processes (computecore.dll's functions), served
// by the Engine. See dispatch_linux.go for the table they join.

var computeMethods = map[string]method{
	wire.MethodCreateComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.CreateSystemArgs) (dispatch.Answer, error) {
		r, err := e.CreateSystem(ctx, a.ID, a.Configuration, sub)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodOpenComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.OpenSystemArgs) (dispatch.Answer, error) {
		r, err := e.OpenSystem(ctx, a.ID, sub)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodCloseComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.SystemArgs) (dispatch.Answer, error) {
		e.CloseSystem(ctx, a.System, sub)
		return dispatch.Answer{}, nil
	}),
	wire.MethodEnumerateComputeSystems: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.QueryArgs) (dispatch.Answer, error) {
		doc, err := e.Enumerate(ctx, a.Query)
		return dispatch.Answer{Result: doc}, err
	}),
	wire.MethodStartComputeSystem:     systemMethod((*Engine).Start),
	wire.MethodShutDownComputeSystem:  systemMethod((*Engine).Shutdown),
	wire.MethodTerminateComputeSystem: systemMethod((*Engine).Terminate),
	wire.MethodPauseComputeSystem:     systemMethod((*Engine).Pause),
	wire.MethodResumeComputeSystem:    systemMethod((*Engine).Resume),
	wire.MethodModifyComputeSystem:    systemMethod((*Engine).Modify),
	wire.MethodGetComputeSystemProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.SystemArgs) (dispatch.Answer, error) {
		doc, err := e.Properties(ctx, a.System, a.Document)
		return dispatch.Answer{Result: doc}, err
	}),

	wire.MethodCreateProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.CreateProcessArgs) (dispatch.Answer, error) {
		r, files, err := e.CreateProcess(ctx, a.System, a.Parameters, sub)
		return dispatch.Answer{Reply: r, Files: files}, err
	}),
	// OpenProcess's args name the process by system and pid: a bare ProcessRef.
	wire.MethodOpenProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.ProcessRef) (dispatch.Answer, error) {
		r, err := e.OpenProcess(ctx, a, sub)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodCloseProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.ProcessArgs) (dispatch.Answer, error) {
		e.CloseProcess(ctx, a.Process, sub)
		return dispatch.Answer{}, nil
	}),
	wire.MethodTerminateProcess: processMethod((*Engine).TerminateProcess),
	wire.MethodSignalProcess:    processMethod((*Engine).SignalProcess),
	wire.MethodModifyProcess:    processMethod((*Engine).ModifyProcess),
	wire.MethodGetProcessProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ProcessArgs) (dispatch.Answer, error) {
		doc, err := e.ProcessProperties(ctx, a.Process, a.Document)
		return dispatch.Answer{Result: doc}, err
	}),

	wire.MethodGetServiceProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.QueryArgs) (dispatch.Answer, error) {
		doc, err := e.ServiceProperties(ctx, a.Query)
		return dispatch.Answer{Result: doc}, err
	}),
	wire.MethodModifyServiceSettings: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ModifyServiceArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, e.ModifyServiceSettings(ctx, a.Settings)
	}),
}

// systemMethod serves a method on one system that takes a document and returns no result.
func systemMethod(op func(e *Engine, ctx context.Context, ref wire.SystemRef, doc string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.SystemArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, op(e, ctx, a.System, a.Document)
	})
}

// processMethod serves a method on one process that takes a document and returns no result.
func processMethod(op func(e *Engine, ctx context.Context, ref wire.ProcessRef, doc string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ProcessArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, op(e, ctx, a.Process, a.Document)
	})
}
