package shim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/api/types"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// deleteExitStatus is what the delete action reports for a task whose shim died: its real
// exit is unknown.
const deleteExitStatus = 255

// manager is the shim's life as containerd's shim package drives it.
type manager struct {
	name string
}

var _ cshim.Shim = (*manager)(nil)

func (m *manager) Name() string { return m.name }

// Start serves the bootstrap protocol of containerd ≥ 2.3. containerd does not use it for a
// binary named *shim-runhcs-v1 (core/runtime/v2/command.go keeps such shims on the legacy
// start protocol, handled by start() before the shim package runs), but a renamed binary
// would get here.
func (m *manager) Start(ctx context.Context, params *bootapi.BootstrapParams) (*bootapi.BootstrapResult, error) {
	f := startFlags{
		namespace: params.GetNamespace(),
		id:        params.GetInstanceID(),
		address:   params.GetContainerdGrpcAddress(),
		debug:     params.GetLogLevel() <= bootapi.LogLevel_LOG_LEVEL_DEBUG,
	}
	addr, err := defaultLauncher().startOrJoin(ctx, f, params.GetContainerdTtrpcAddress())
	if err != nil {
		return nil, err
	}
	return &bootapi.BootstrapResult{Version: 3, Address: addr, Protocol: "ttrpc"}, nil
}

// Stop is the delete action, run by containerd after a shim died: it terminates the task's
// compute system, unmounts its layers and removes its state. Every step tolerates having been
// done already, so it can run any number of times.
func (m *manager) Stop(ctx context.Context, id string) (cshim.StopStatus, error) {
	bundle := ""
	if o, ok := ctx.Value(cshim.OptsKey{}).(cshim.Opts); ok {
		bundle = o.BundlePath
	}
	if bundle == "" {
		wd, err := os.Getwd()
		if err != nil {
			return cshim.StopStatus{}, err
		}
		bundle = wd
	}
	timeout, err := task.TimeoutFromEnv()
	if err != nil {
		return cshim.StopStatus{}, err
	}
	host := newHCSHost(hcs.NewHostClient())
	ccg, _ := host.(task.CredentialGuards) // the instance of a crashed shim's task goes too
	deps := task.Deps{Host: host, Mounter: layers.NewMounter(), HNS: task.DefaultHNS, HostProcess: hostprocess.New, HCSTimeout: timeout, CCG: ccg}
	if sandbox.IsBundle(bundle) {
		// A sandbox of the sandbox API (sandbox_service.go) whose shim was killed.
		pid, err := sandbox.Cleanup(ctx, bundle, sandboxReleaser{deps: deps, id: id, address: flagValue("address")})
		if err != nil {
			return cshim.StopStatus{}, err
		}
		return cshim.StopStatus{Pid: int(pid), ExitStatus: deleteExitStatus, ExitedAt: time.Now()}, nil
	}
	pid, err := task.Cleanup(ctx, deps, id, bundle)
	if err != nil {
		return cshim.StopStatus{}, err
	}
	return cshim.StopStatus{Pid: int(pid), ExitStatus: deleteExitStatus, ExitedAt: time.Now()}, nil
}

// Info answers `-info`: the runtime's name and version, after validating the options given on
// stdin (a containerd.runhcs.v1.Options in an Any), if any.
func (m *manager) Info(ctx context.Context, optionsR io.Reader) (*types.RuntimeInfo, error) {
	b, err := io.ReadAll(io.LimitReader(optionsR, maxOptionsSize))
	if err != nil {
		return nil, err
	}
	var opts *anypb.Any
	if len(b) > 0 {
		opts = &anypb.Any{}
		if err := proto.Unmarshal(b, opts); err != nil {
			return nil, fmt.Errorf("runtime options on stdin: %w", err)
		}
		if _, err := decodeOptions(opts); err != nil {
			return nil, err
		}
	}
	return &types.RuntimeInfo{
		Options: opts,
		Name:    m.name,
		Version: &types.RuntimeVersion{Version: Version},
	}, nil
}

// sandboxReleaser is the delete action's side of a Hyper-V sandbox whose shim was killed: its
// utility VM was made as a Hyper-V pod's sandbox task (task.CreateVMSandbox, which recorded it
// in the bundle), so the task clean-up ends it; its boot image's view and lease are removed
// through containerd at address (bootimage.go).
type sandboxReleaser struct {
	deps        task.Deps
	id, address string
}

func (r sandboxReleaser) ReleaseVM(ctx context.Context, bundle string) error {
	_, err := task.Cleanup(ctx, r.deps, r.id, bundle)
	return err
}

func (r sandboxReleaser) ReleaseBoot(ctx context.Context, rec sandbox.BootRecord) error {
	if r.address == "" {
		return fmt.Errorf("view %s and lease %s: the delete action has no containerd address: %w", rec.View, rec.Lease, errdefs.ErrFailedPrecondition)
	}
	return releaseBoot(ctx, r.address, rec)
}

// flagValue is the value of the shim package's command-line flag name ("" if it has none).
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
