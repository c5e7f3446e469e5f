package shim

import (
	"context"
	"flag"
	"sync"

	cshim "github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/containerd/ttrpc"

	sandboxapi "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// The task service as a plugin of containerd's shim package (runc's shim: task/plugin/).

var registerOnce sync.Once

// registerPlugins registers the task service with the shim package's plugin registry, the way
// containerd's runc shim does (cmd/containerd-shim-runc-v2/task/plugin).
func registerPlugins() {
	registerOnce.Do(func() {
		registry.Register(&plugin.Registration{
			Type:     plugins.TTRPCPlugin,
			ID:       "task",
			Requires: []plugin.Type{plugins.EventPlugin, plugins.InternalPlugin},
			InitFn: func(ic *plugin.InitContext) (any, error) {
				pp, err := ic.GetByID(plugins.EventPlugin, "publisher")
				if err != nil {
					return nil, err
				}
				ss, err := ic.GetByID(plugins.InternalPlugin, "shutdown")
				if err != nil {
					return nil, err
				}
				sd := ss.(shutdown.Service)
				// The shim's one HCS client and layer mounter, made here and passed down:
				// nothing below keeps a package-level one.
				timeout, err := task.TimeoutFromEnv()
				if err != nil {
					return nil, err
				}
				svc := newService(ic.Context, newHCSHost(hcs.NewHostClient()), layers.NewMounter(), pp.(cshim.Publisher), sd)
				svc.deps.HCSTimeout = timeout
				// containerd's gRPC address (its -address), where a Hyper-V sandbox-API
				// sandbox finds its boot image (bootimage.go).
				if address, ok := ic.Properties[plugins.PropertyGRPCAddress]; ok && address != "" {
					svc.bootImage = func(sandboxID, ref string) (sandbox.BootImage, error) {
						return newContainerdBoot(address, svc.deps.Namespace, sandboxID, ref)
					}
				}
				// The task the shim was started for has its log pipe from pkg/shim (its -id flag).
				if f := flag.Lookup("id"); f != nil {
					svc.logs.skip = f.Value.String()
				}
				if address, err := cshim.ReadAddress("address"); err == nil {
					sd.RegisterCallback(func(context.Context) error { return removeShimSocket(address) })
				}
				log.G(ic.Context).Info("runhcs task service ready")
				return taskServices{svc}, nil
			},
		})
	})
}

// taskServices registers the one task service under both names containerd calls it by, and
// the sandbox and diag services beside it.
type taskServices struct{ s *service }

// UnaryServerInterceptor gives every error its gRPC code from its errdefs kind (NotFound,
// InvalidArgument, …), as runc's shim does with errgrpc.ToGRPC in each method, so containerd
// and its clients see the right kind instead of Unknown.
func (taskServices) UnaryServerInterceptor() ttrpc.UnaryServerInterceptor {
	return func(ctx context.Context, unmarshal ttrpc.Unmarshaler, _ *ttrpc.UnaryServerInfo, method ttrpc.Method) (any, error) {
		resp, err := method(ctx, unmarshal)
		if err != nil {
			return nil, errgrpc.ToGRPC(err)
		}
		return resp, nil
	}
}

func (t taskServices) RegisterTTRPC(server *ttrpc.Server) error {
	taskv3.RegisterTTRPCTaskService(server, t.s)
	taskv2.RegisterTTRPCTaskService(server, serviceV2(t))
	// The sandbox API (sandbox_service.go), for a runtime handler with sandboxer = "shim".
	sandboxapi.RegisterTTRPCSandboxService(server, sandboxService(t))
	// The diag service (diag.go) on the same server, as hcsshim serves it beside its task API.
	registerDiag(server, t.s)
	return nil
}
