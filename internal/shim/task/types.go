package task

import (
	"context"
	"io"
	"time"

	"github.com/containerd/containerd/v2/core/events"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/layers"
)

// The small interfaces this package needs, defined here where they are used (hcsshim's
// controllers' types.go). The shim binds them to internal/hcs and internal/layers; its tests
// to fakes.

// Host creates and opens compute systems (an *hcs.Client).
type Host interface {
	CreateComputeSystem(ctx context.Context, id string, document any) (System, error)
	OpenComputeSystem(ctx context.Context, id string) (System, error)
}

// System is what a task needs of an *hcs.System.
type System interface {
	ID() string
	Start(ctx context.Context) error
	Terminate(ctx context.Context) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error)
	Modify(ctx context.Context, req *schema2.ModifySettingRequest) error
	CreateProcess(ctx context.Context, p *schema2.ProcessParameters) (HCSProcess, error)
	Exited() <-chan struct{}
	Close() error
}

// HCSProcess is what a process needs of an *hcs.Process.
type HCSProcess interface {
	Pid() uint32
	Stdio() (stdin io.WriteCloser, stdout, stderr io.ReadCloser)
	Signal(ctx context.Context, o *schema2.SignalProcessOptions) (delivered bool, err error)
	Kill(ctx context.Context) (delivered bool, err error)
	Exited() <-chan struct{}
	ExitCode() (int, error)
	ResizeConsole(ctx context.Context, width, height uint16) error
	Close() error
}

// Mounter mounts and unmounts a task's layer chain (internal/layers).
type Mounter interface {
	Mount(ctx context.Context, c *layers.Chain) (string, error)
	Unmount(ctx context.Context, scratch string) error
}

// HNS is what a task needs of the Host Network Service (an *hns.Client): a namespace of its
// own for a spec's endpoint list (network.go).
type HNS interface {
	CreateNamespace(ctx context.Context, typ string) (*hcn.HostComputeNamespace, error)
	AddNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error
	RemoveNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error
	DeleteNamespace(ctx context.Context, id string) error
}

// Events is where tasks publish their events (TaskStart, TaskExit, …), in order.
type Events interface {
	Send(topic string, e events.Event)
}

// Deps is what every task of a shim is given: the shim's lifetime context (for the goroutines
// that outlive a request: exit watchers, stdio relays), its namespace (for stdio pipe names),
// and the host, mounter and event sink.
type Deps struct {
	Ctx       context.Context
	Namespace string
	Host      Host
	Mounter   Mounter
	Events    Events
	// HNS gives an HNS client when a task first needs one (DefaultHNS), so that shims
	// without such tasks never connect to HNS. nil: no task may need one.
	HNS func() (HNS, error)
	// ExitGrace is how long a process's exit notification may trail its system's; 0 means
	// DefaultExitGrace.
	ExitGrace time.Duration
	// CCG makes and removes Container Credential Guard instances (gMSA); nil: a task with a
	// credential spec is refused.
	CCG CredentialGuards
}

// CredentialGuards is what a task needs of HCS's Container Credential Guard (*hcs.Client).
type CredentialGuards interface {
	AddCredentialGuard(ctx context.Context, id, credSpec, transport string) (*schema2.ContainerCredentialGuardState, error)
	RemoveCredentialGuard(ctx context.Context, id string) error
}

// Bounds of HCS calls. Creating and starting a silo takes seconds on real Windows (hcsshim
// allows minutes); everything else should be quick.
const (
	CreateTimeout  = 4 * time.Minute
	HCSCallTimeout = 1 * time.Minute
	// QuickTimeout bounds the HCS calls behind RPCs that must answer within a second.
	QuickTimeout = 800 * time.Millisecond
	// drainTimeout bounds the wait for a process's output to reach EOF after it exited
	// (something else in the container may hold its pipes open).
	drainTimeout = 10 * time.Second
	// DefaultExitGrace is Deps.ExitGrace's default.
	DefaultExitGrace = 5 * time.Second
)
