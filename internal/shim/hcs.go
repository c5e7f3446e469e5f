package shim

import (
	"context"
	"io"
	"time"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/layers"
)

// Bounds of HCS calls. Creating and starting a silo takes seconds on real Windows (hcsshim
// allows minutes); everything else should be quick.
const (
	createTimeout  = 4 * time.Minute
	hcsCallTimeout = 1 * time.Minute
	// quickTimeout bounds the HCS calls behind RPCs that must answer within a second.
	quickTimeout = 800 * time.Millisecond
	// drainTimeout bounds the wait for a process's output to reach EOF after it exited
	// (something else in the container may hold its pipes open).
	drainTimeout = 10 * time.Second
)

// hcsHost is what the shim needs from internal/hcs at package level.
type hcsHost interface {
	CreateComputeSystem(ctx context.Context, id string, document any) (computeSystem, error)
	OpenComputeSystem(ctx context.Context, id string) (computeSystem, error)
	HostOSVersion(ctx context.Context) (string, error)
	// IsGone reports whether err says the system or process does not exist or already
	// stopped (hcs.ErrNotFound, ErrAlreadyStopped, ErrProcessAlreadyStopped).
	IsGone(err error) bool
}

// computeSystem is what the shim needs of an *hcs.System.
type computeSystem interface {
	ID() string
	Start(ctx context.Context) error
	Shutdown(ctx context.Context) error
	Terminate(ctx context.Context) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error)
	Modify(ctx context.Context, req *schema2.ModifySettingRequest) error
	CreateProcess(ctx context.Context, p *schema2.ProcessParameters) (hcsProcess, error)
	Exited() <-chan struct{}
	ExitError() error
	Close() error
}

// hcsProcess is what the shim needs of an *hcs.Process.
type hcsProcess interface {
	Pid() uint32
	Stdio() (stdin io.WriteCloser, stdout, stderr io.ReadCloser)
	Signal(ctx context.Context, o *schema2.SignalProcessOptions) (delivered bool, err error)
	Kill(ctx context.Context) (delivered bool, err error)
	Exited() <-chan struct{}
	ExitCode() (int, error)
	ResizeConsole(ctx context.Context, width, height uint16) error
	CloseStdin(ctx context.Context) error
	Close() error
}

// layerMounter is what the shim needs of internal/layers.
type layerMounter interface {
	Mount(ctx context.Context, c *layers.Chain) (string, error)
	Unmount(ctx context.Context, scratch string) error
}
