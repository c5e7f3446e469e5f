package sandbox

import (
	"context"

	"github.com/openhcs/runhcs/protocols/stats"
)

// Pod is what a sandbox runs, defined here where it is used: the resources of a
// process-isolated pod (process.go), or, later, a Hyper-V pod's utility VM. A sandbox calls
// Start once, Stop any number of times, and Release last.
type Pod interface {
	// Start makes the pod run; pid is the process that stands for it (StartSandbox's pid).
	Start(ctx context.Context) (pid uint32, err error)
	// Stop ends the pod; a pod that already ended is no error. Exited is closed once it has.
	Stop(ctx context.Context) error
	// Exited is closed when the pod has ended, by Stop or by itself (a VM crash).
	Exited() <-chan struct{}
	// ExitStatus is the pod's exit status once Exited is closed (0 after Stop).
	ExitStatus() uint32
	// Release frees what the pod holds; idempotent.
	Release(ctx context.Context) error
	// Statistics are the pod's own statistics, not its containers'.
	Statistics(ctx context.Context) (*stats.Statistics, error)
}
