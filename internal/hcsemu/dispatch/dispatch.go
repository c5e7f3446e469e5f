package dispatch

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Subscriber is the connection a request came on: the handles it opens are its, and their
// notifications go to it.
type Subscriber interface {
	Notify(ev wire.Event)
}

// PipeRelayer is a Subscriber that can open the host's named pipes and relay them: the
// server's TCP connections, whose client is the stand-in computecore.dll under Wine, beside the
// pipe's server. Compute systems with mapped pipes (internal/hcsemu/compute pipes_linux.go)
// ask their holders for it.
type PipeRelayer interface {
	Subscriber
	// CanRelayPipes says whether this subscriber has a Windows side at all.
	CanRelayPipes() bool
	// RelayPipe asks the subscriber to open hostPipe and relay it to c; it owns c from then.
	RelayPipe(ctx context.Context, sys wire.SystemRef, hostPipe string, c net.Conn) error
}

// Answer is what a method returns on success; the server turns it into the response frame.
type Answer struct {
	Result string     // the HCS result document (Frame.Result)
	Reply  any        // the method's …Reply, encoded into Frame.Reply; nil for none
	Files  []*os.File // sent with the response (a process's stdio), then closed
}

// A Method serves one request: it decodes the frame's args and calls its service. sub is the
// connection the request came on.
type Method func(ctx context.Context, sub Subscriber, f *wire.Frame) (Answer, error)

// WithArgs makes a Method of a handler of typed args: the frame's args are decoded strictly
// into an A first. A decoding error is not an HRESULT error: the server answers it as a
// protocol error.
func WithArgs[A any](h func(ctx context.Context, sub Subscriber, a A) (Answer, error)) Method {
	return func(ctx context.Context, sub Subscriber, f *wire.Frame) (Answer, error) {
		var a A
		if err := f.DecodeArgs(&a); err != nil {
			return Answer{}, err
		}
		return h(ctx, sub, a)
	}
}

// Compose makes one dispatch table of groups of methods, each a service's. A name served twice
// is a programming error, and panics naming it.
func Compose(groups ...map[string]Method) map[string]Method {
	table := map[string]Method{}
	for _, group := range groups {
		for name, m := range group {
			if _, dup := table[name]; dup {
				panic(fmt.Sprintf("hcsemu: wire method %q is served twice", name))
			}
			table[name] = m
		}
	}
	return table
}
