package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/api/types"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
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
// done already, so it can run any number of times. For the pod's own bundle (the shim's id)
// it also cleans up the tasks that joined the pod without a start run of their own
// (joinedBundles): containerd runs no delete for those.
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
	pid, err := cleanupBundle(ctx, deps, id, bundle)
	if err != nil {
		return cshim.StopStatus{}, err
	}
	return cshim.StopStatus{Pid: int(pid), ExitStatus: deleteExitStatus, ExitedAt: time.Now()}, nil
}

// cleanupBundle is the delete action's work for task or sandbox id of bundle, and for the tasks
// that joined it as a pod (joinedBundles); it returns the pid Stop reports.
func cleanupBundle(ctx context.Context, deps task.Deps, id, bundle string) (uint32, error) {
	var pid uint32
	var err error
	if sandbox.IsBundle(bundle) {
		// A sandbox of the sandbox API (sandbox_service.go) whose shim was killed.
		pid, err = sandbox.Cleanup(ctx, bundle)
	} else {
		pid, err = task.Cleanup(ctx, deps, id, bundle)
	}
	if err != nil {
		return 0, err
	}
	joined, err := joinedBundles(bundle, id)
	for _, b := range joined {
		if _, jerr := task.Cleanup(ctx, deps, filepath.Base(b), b); jerr != nil {
			err = errors.Join(err, fmt.Errorf("task %s of pod %s: %w", filepath.Base(b), id, jerr))
		}
	}
	return pid, err
}

// Where containerd 2.x keeps bundles, under its state directory: task bundles in the task
// runtime plugin's folder, sandbox-API sandboxes' in the shim sandbox controller's, each as
// <plugin folder>/<namespace>/<id> (core/runtime/v2/bundle.go NewBundle; the plugin folder is
// the plugin's type and id, as in docs/sandbox-api.md).
const taskBundles = "io.containerd.runtime.v2.task"

// joinedBundleSandboxFile is the file containerd 2.x writes, with the pod's id, in the bundle
// of a task it hands to a running pod's shim without running the start action
// (core/runtime/v2/shim_manager.go ShimManager.Start, for a pod whose shim advertised bootstrap
// version 3, next to the bundle's bootstrap.json).
const joinedBundleSandboxFile = "sandbox"

// joinedBundles returns the bundles of the tasks that joined pod id, whose own bundle is
// bundle (a pause container's task bundle, or a sandbox-API sandbox's), without a start run:
// those in the namespace's task folder whose sandbox file names the pod. containerd runs no
// delete action for such a task when the pod's shim dies (its connection is made with no
// clean-up hook, unlike a started shim's: core/runtime/v2/shim_manager.go Start, loadShim
// with an empty onClose), so the pod's delete cleans them up. A task folder that does not
// exist has none.
func joinedBundles(bundle, id string) ([]string, error) {
	ns := filepath.Dir(bundle)
	dir := filepath.Join(filepath.Dir(filepath.Dir(ns)), taskBundles, filepath.Base(ns))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tasks of pod %s: %w", id, err)
	}
	var joined []string
	for _, e := range entries {
		b := filepath.Join(dir, e.Name())
		if !e.IsDir() || e.Name() == id || b == bundle {
			continue
		}
		sb, err := os.ReadFile(filepath.Join(b, joinedBundleSandboxFile))
		if err != nil || strings.TrimSpace(string(sb)) != id {
			continue
		}
		joined = append(joined, b)
	}
	return joined, nil
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
