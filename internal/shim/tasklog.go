package shim

import (
	"context"
	"io"
	"sync"

	"github.com/containerd/log"
)

// taskLogs serves the shim log endpoint containerd opens for every task it starts, for the
// tasks that joined this pod's shim (the pod's first task, whose id the shim was started with,
// has the one containerd's shim package serves).
//
// Why: containerd on Windows dials \\.\pipe\containerd-shim-<ns>-<id>-log for each task
// (core/runtime/v2 openShimLog, retrying for up to 5 s while the pipe does not exist), and
// closing the task's shim connection waits for that dial to end. For the 2nd to Nth container
// of a pod nobody served the pipe, so deleting a short-lived container stalled up to 5 s and
// with it StopPodSandbox, which waits for each container's delete before it kills the sandbox.
// The pipe carries nothing: the pod's shim logs once, to its first task's pipe.
type taskLogs struct {
	open  func(namespace, id string) (io.Closer, error) // nil where containerd does not dial (Unix: a FIFO it opens without waiting)
	skip  string                                        // the shim's own id
	mu    sync.Mutex
	pipes map[string]io.Closer
}

// serve starts serving task id's log endpoint (from the start of its create: containerd dials
// before it creates, and waits for the dial also when the create fails); a failure is logged,
// not returned: the task runs without it, as before.
func (l *taskLogs) serve(ctx context.Context, namespace, id string) {
	if l.open == nil || id == l.skip {
		return
	}
	c, err := l.open(namespace, id)
	if err != nil {
		log.G(ctx).WithError(err).WithField("task", id).Warn("serve the task's shim log pipe")
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pipes == nil {
		l.pipes = map[string]io.Closer{}
	}
	if old, ok := l.pipes[id]; ok {
		old.Close()
	}
	l.pipes[id] = c
}

// close stops serving task id's log endpoint.
func (l *taskLogs) close(id string) {
	l.mu.Lock()
	c, ok := l.pipes[id]
	delete(l.pipes, id)
	l.mu.Unlock()
	if ok {
		c.Close()
	}
}

// closeAll stops serving every endpoint (the shim is shutting down).
func (l *taskLogs) closeAll() {
	l.mu.Lock()
	pipes := l.pipes
	l.pipes = nil
	l.mu.Unlock()
	for _, c := range pipes {
		c.Close()
	}
}
