package task

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/hostprocess"
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
// own for a spec's endpoint list (network.go), and the documents of a namespace and its
// endpoints to give a Hyper-V pod's utility VM (uvm.HNS).
type HNS interface {
	GetNamespace(ctx context.Context, id string) (*hcn.HostComputeNamespace, error)
	GetEndpoint(ctx context.Context, id string) (*hcn.HostComputeEndpoint, error)
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
	// HCSTimeout, when not 0, bounds every HCS call of the tasks in place of CreateTimeout and
	// HCSCallTimeout (QuickTimeout stays): the shim sets it from HCSSHIM_TIMEOUT_SECONDS
	// (TimeoutFromEnv).
	HCSTimeout time.Duration
	// CCG makes and removes Container Credential Guard instances (gMSA); nil: a task with a
	// credential spec is refused.
	CCG CredentialGuards
	// HostProcess gives the host's HostProcess services when a task first needs them
	// (hostprocess.New); nil: HostProcess containers are refused.
	HostProcess func() (hostprocess.Host, error)
}

// createTimeout bounds creating and starting a compute system or a process.
func (d Deps) createTimeout() time.Duration { return cmp.Or(d.HCSTimeout, CreateTimeout) }

// callTimeout bounds every other HCS call.
func (d Deps) callTimeout() time.Duration { return cmp.Or(d.HCSTimeout, HCSCallTimeout) }

// TimeoutEnv is the environment variable that overrides the shim's HCS timeouts, in whole
// seconds: the variable Microsoft's shim reads for the same purpose (hcsshim
// internal/timeout/timeout.go: HCSSHIM_TIMEOUT_SECONDS, a positive integer, default 4 minutes
// there). containerd starts shims with its own environment, so it is set on containerd.
const TimeoutEnv = "HCSSHIM_TIMEOUT_SECONDS"

// TimeoutFromEnv returns the HCS timeout TimeoutEnv asks for, 0 when it is not set. A value
// that is not a positive number of seconds is an error naming it (hcsshim ignores such a
// value; a shim that silently waits 4 minutes instead of the 5 seconds asked for misleads).
func TimeoutFromEnv() (time.Duration, error) {
	v, ok := os.LookupEnv(TimeoutEnv)
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number of seconds: %w", TimeoutEnv, v, errdefs.ErrInvalidArgument)
	}
	return time.Duration(n) * time.Second, nil
}

// CredentialGuards is what a task needs of HCS's Container Credential Guard (*hcs.Client).
type CredentialGuards interface {
	AddCredentialGuard(ctx context.Context, id, credSpec, transport string) (*schema2.ContainerCredentialGuardInstance, error)
	RemoveCredentialGuard(ctx context.Context, id string) error
}

// Bounds of HCS calls. Creating and starting a silo takes seconds on real Windows (hcsshim
// allows minutes); everything else should be quick.
const (
	CreateTimeout  = 4 * time.Minute
	HCSCallTimeout = 1 * time.Minute
	// QuickTimeout bounds the HCS calls behind RPCs that must answer within a second (Pids):
	// a quarter of it, so that the fallback answer still arrives in time on a busy machine
	// (the soak suite measured answers of 802 ms at 800 ms, and once 1.04 s at 500 ms with
	// the machine's load near 8: containerd's and ttrpc's own share grows with the load).
	QuickTimeout = 250 * time.Millisecond
	// drainTimeout bounds the wait for a process's output to reach EOF after it exited
	// (something else in the container may hold its pipes open).
	drainTimeout = 10 * time.Second
	// DefaultExitGrace is Deps.ExitGrace's default.
	DefaultExitGrace = 5 * time.Second
)
