package hcsemu

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of compute systems and their processes (computecore.dll's functions), served
// by the Engine. See dispatch_linux.go for the table they join.

func init() { addMethods(computeMethods) }

var computeMethods = map[string]method{
	wire.MethodCreateComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.CreateSystemArgs) (answer, error) {
		r, err := e.CreateSystem(ctx, a.ID, a.Configuration, sub)
		return answer{reply: r}, err
	}),
	wire.MethodOpenComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.OpenSystemArgs) (answer, error) {
		r, err := e.OpenSystem(ctx, a.ID, sub)
		return answer{reply: r}, err
	}),
	wire.MethodCloseComputeSystem: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.SystemArgs) (answer, error) {
		e.CloseSystem(ctx, a.System, sub)
		return answer{}, nil
	}),
	wire.MethodEnumerateComputeSystems: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.QueryArgs) (answer, error) {
		doc, err := e.Enumerate(ctx, a.Query)
		return answer{result: doc}, err
	}),
	wire.MethodStartComputeSystem:     systemMethod((*Engine).Start),
	wire.MethodShutDownComputeSystem:  systemMethod((*Engine).Shutdown),
	wire.MethodTerminateComputeSystem: systemMethod((*Engine).Terminate),
	wire.MethodPauseComputeSystem:     systemMethod((*Engine).Pause),
	wire.MethodResumeComputeSystem:    systemMethod((*Engine).Resume),
	wire.MethodModifyComputeSystem:    systemMethod((*Engine).Modify),
	wire.MethodGetComputeSystemProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.SystemArgs) (answer, error) {
		doc, err := e.Properties(ctx, a.System, a.Document)
		return answer{result: doc}, err
	}),

	wire.MethodCreateProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.CreateProcessArgs) (answer, error) {
		r, files, err := e.CreateProcess(ctx, a.System, a.Parameters, sub)
		return answer{reply: r, files: files}, err
	}),
	// OpenProcess's args name the process by system and pid: a bare ProcessRef.
	wire.MethodOpenProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.ProcessRef) (answer, error) {
		r, err := e.OpenProcess(ctx, a, sub)
		return answer{reply: r}, err
	}),
	wire.MethodCloseProcess: withArgs(func(ctx context.Context, e *Engine, sub Subscriber, a wire.ProcessArgs) (answer, error) {
		e.CloseProcess(ctx, a.Process, sub)
		return answer{}, nil
	}),
	wire.MethodTerminateProcess: processMethod((*Engine).TerminateProcess),
	wire.MethodSignalProcess:    processMethod((*Engine).SignalProcess),
	wire.MethodModifyProcess:    processMethod((*Engine).ModifyProcess),
	wire.MethodGetProcessProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ProcessArgs) (answer, error) {
		doc, err := e.ProcessProperties(ctx, a.Process, a.Document)
		return answer{result: doc}, err
	}),

	wire.MethodGetServiceProperties: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.QueryArgs) (answer, error) {
		doc, err := e.ServiceProperties(ctx, a.Query)
		return answer{result: doc}, err
	}),
	wire.MethodModifyServiceSettings: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ModifyServiceArgs) (answer, error) {
		return answer{}, e.ModifyServiceSettings(ctx, a.Settings)
	}),
}

// systemMethod serves a method on one system that takes a document and returns no result.
func systemMethod(op func(e *Engine, ctx context.Context, ref wire.SystemRef, doc string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.SystemArgs) (answer, error) {
		return answer{}, op(e, ctx, a.System, a.Document)
	})
}

// processMethod serves a method on one process that takes a document and returns no result.
func processMethod(op func(e *Engine, ctx context.Context, ref wire.ProcessRef, doc string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.ProcessArgs) (answer, error) {
		return answer{}, op(e, ctx, a.Process, a.Document)
	})
}
