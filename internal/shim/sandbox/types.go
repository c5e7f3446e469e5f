package sandbox

import (
	"context"

	"github.com/openhcs/runhcs/protocols/stats"
)

// Pod is what a sandbox runs, defined here where it is used: the resources of a
// process-isolated pod (process.go), or a Hyper-V pod's utility VM (hyperv.go). A sandbox calls
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

// BootRecord names what a BootImage makes in containerd to give a utility VM its boot layer:
// a read-only view of the image's top snapshot, under a lease of its own. It is recorded in
// the sandbox's bundle before anything is made, so that the delete action can remove it
// after a killed shim (Releaser).
type BootRecord struct {
	// Image is the image whose base layer boots the VM (runtime option sandbox_image).
	Image string `json:"image"`
	// Snapshotter is the snapshotter the image was unpacked into, which holds the view.
	Snapshotter string `json:"snapshotter"`
	// View is the key of the view; Lease the id of the lease that holds it.
	View  string `json:"view"`
	Lease string `json:"lease"`
}

// BootImage gives a Hyper-V pod's utility VM its boot layer.
type BootImage interface {
	// Acquire makes the image's layers available and returns their folders, nearest first.
	// It calls record with what it will make before making it.
	Acquire(ctx context.Context, record func(BootRecord) error) (parents []string, _ error)
	// Release removes what Acquire made; idempotent, and nothing when Acquire made nothing.
	Release(ctx context.Context) error
}

// PodVM is a Hyper-V pod's running utility VM, as the shim makes it.
type PodVM interface {
	// Terminate ends the VM, and every container in it; a VM that ended is no error.
	Terminate(ctx context.Context) error
	// Exited is closed when the VM has ended, by Terminate or by itself (a crash).
	Exited() <-chan struct{}
	// Release removes the VM and what it holds; idempotent.
	Release(ctx context.Context) error
	// Statistics are the VM's.
	Statistics(ctx context.Context) (*stats.Statistics, error)
}

// VMMaker makes and starts a pod's utility VM, booted from the uppermost of parents (nearest
// first) that holds a UtilityVM folder.
type VMMaker func(ctx context.Context, parents []string) (PodVM, error)

// Releaser is what Cleanup needs for a Hyper-V sandbox whose shim was killed: the end of its
// VM, from what the VM's maker recorded in bundle, and the removal of its boot image's view
// and lease. Both tolerate having been done already.
type Releaser interface {
	ReleaseVM(ctx context.Context, bundle string) error
	ReleaseBoot(ctx context.Context, r BootRecord) error
}
