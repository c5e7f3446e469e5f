package hcsemu

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The server's dispatch table, from wire method name to the method that serves it, composed
// explicitly in methods from each service's group: HNS's (internal/hcsemu/hns), the storage
// filter's (internal/hcsemu/storage) and the engine's own, which files declare beside the wire
// names they serve (methods_compute_linux.go for compute systems and processes,
// methods_fault*_linux.go for fault injection, hostperf_linux.go). A new group of methods is
// one more argument here; no table is filled behind the reader's back.

// methods composes e's dispatch table, once, in NewEngine (Engine.table).
func (e *Engine) methods() map[string]dispatch.Method {
	return dispatch.Compose(
		bind(e, computeMethods),
		storage.Methods(e.storage),
		bind(e, faultMethods),
		bind(e, faultVMMethods),
		bind(e, hostPerfMethods),
		hns.Methods(e.hns),
	)
}

// A method is an engine's wire method: a dispatch.Method once bound to its Engine.
type method func(ctx context.Context, e *Engine, sub Subscriber, f *wire.Frame) (dispatch.Answer, error)

// bind makes dispatch methods of a group of e's methods.
func bind(e *Engine, group map[string]method) map[string]dispatch.Method {
	out := make(map[string]dispatch.Method, len(group))
	for name, m := range group {
		out[name] = func(ctx context.Context, sub dispatch.Subscriber, f *wire.Frame) (dispatch.Answer, error) {
			return m(ctx, e, sub, f)
		}
	}
	return out
}

// withArgs makes a method of a handler of typed args: the frame's args are decoded strictly
// into an A first (an undecodable request fails as a protocol error, see isProtocolError).
func withArgs[A any](h func(ctx context.Context, e *Engine, sub Subscriber, a A) (dispatch.Answer, error)) method {
	return func(ctx context.Context, e *Engine, sub Subscriber, f *wire.Frame) (dispatch.Answer, error) {
		return dispatch.WithArgs(func(ctx context.Context, sub dispatch.Subscriber, a A) (dispatch.Answer, error) {
			return h(ctx, e, sub, a)
		})(ctx, sub, f)
	}
}
