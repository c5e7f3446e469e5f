package compute

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

// What the server (internal/hcsemu/server, its Engine interface) asks of the engine it serves.

// Method returns the method serving the wire method name.
func (e *Engine) Method(name string) (dispatch.Method, bool) {
	m, ok := e.table[name]
	return m, ok
}

// BeforeRequest applies the injected faults to a request of method (fault_linux.go).
func (e *Engine) BeforeRequest(ctx context.Context, method string) error {
	return e.faults.before(ctx, method)
}

// Track registers a served connection for FaultDisconnect, which calls drop.
func (e *Engine) Track(sub Subscriber, drop func()) (untrack func()) {
	return e.faults.track(sub, drop)
}

// ClientPaths checks a connection's drive mapping (hostpaths.go) and returns what gives it to
// the connection's requests.
func (e *Engine) ClientPaths(a wire.ClientPathsArgs) (func(context.Context) context.Context, error) {
	hp, err := newHostPaths(a)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) context.Context { return withHostPaths(ctx, hp) }, nil
}

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
