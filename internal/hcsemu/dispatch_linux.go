package hcsemu

import (
	"context"
	"fmt"
	"os"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The server's dispatch: a table from wire method name to the method that serves it. Each file
// that serves a group of methods (methods_compute_linux.go for HCS compute systems and
// processes) declares its entries beside the wire names it serves and adds them with
// addMethods from an init function, so that a new group is a new file and touches no switch.

// A method serves one request: it decodes the frame's args and calls the engine. sub is the
// connection, the Subscriber of the handles the request opens.
type method func(ctx context.Context, e *Engine, sub Subscriber, f *wire.Frame) (answer, error)

// answer is what a method returns on success; the server turns it into the response frame.
type answer struct {
	result string     // the HCS result document (Frame.Result)
	reply  any        // the method's …Reply, encoded into Frame.Reply; nil for none
	files  []*os.File // sent with the response (a process's stdio), then closed
}

// methods is the dispatch table. It is filled by init functions only and read-only afterwards.
var methods = map[string]method{}

// addMethods adds a group of entries to the table. A name served twice is a programming error.
func addMethods(group map[string]method) {
	for name, m := range group {
		if _, dup := methods[name]; dup {
			panic(fmt.Sprintf("hcsemu: wire method %q is served twice", name))
		}
		methods[name] = m
	}
}

// withArgs makes a method of a handler of typed args: the frame's args are decoded strictly
// into an A first (an undecodable request fails as a protocol error, see isProtocolError).
func withArgs[A any](h func(ctx context.Context, e *Engine, sub Subscriber, a A) (answer, error)) method {
	return func(ctx context.Context, e *Engine, sub Subscriber, f *wire.Frame) (answer, error) {
		var a A
		if err := f.DecodeArgs(&a); err != nil {
			return answer{}, err
		}
		return h(ctx, e, sub, a)
	}
}
