package shim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"time"

	sandboxapi "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/pod"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// The sandbox service: containerd.runtime.sandbox.v1.Sandbox, served beside the task service
// on the shim's one ttrpc server, for a runtime handler with sandboxer = "shim" (containerd
// 2.x; plugins/sandbox/controller.go is containerd's client). One shim serves one pod, so it
// holds at most one sandbox; the pod's containers then join it as tasks. The sandbox's
// lifecycle is internal/shim/sandbox's; this only translates.

// sandboxOptionsFile is where the start action leaves the runtime options of a sandbox
// bundle: containerd gives them to a shim only on the start action's stdin (for the sandbox,
// core/runtime/v2/shim_manager.go Start → binary.Start), and CreateSandboxRequest carries the
// CRI's PodSandboxConfig instead.
const sandboxOptionsFile = "runhcs-options.pb"

// recordSandboxOptions keeps the runtime options of a bundle without config.json (the sandbox
// API's bundles have none: containerd's sandbox controller passes no spec) for CreateSandbox.
func recordSandboxOptions(bundle string, raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(bundle, "config.json")); err == nil {
		return nil
	}
	if err := atomicfile.WriteFile(filepath.Join(bundle, sandboxOptionsFile), raw, 0o600); err != nil {
		return fmt.Errorf("record the runtime options of sandbox bundle %q: %w", bundle, err)
	}
	return nil
}

// sandboxOptions reads what recordSandboxOptions kept (empty options if nothing).
func sandboxOptions(bundle string) (*options.Options, error) {
	b, err := os.ReadFile(filepath.Join(bundle, sandboxOptionsFile))
	if errors.Is(err, os.ErrNotExist) {
		return &options.Options{}, nil
	}
	if err != nil {
		return nil, err
	}
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("runtime options in %q: %v: %w", filepath.Join(bundle, sandboxOptionsFile), err, errdefs.ErrInvalidArgument)
	}
	return decodeOptions(&a)
}

type sandboxService struct{ s *service }

var _ sandboxapi.TTRPCSandboxService = sandboxService{}

// getSandbox returns the shim's sandbox if it is id.
func (s *service) getSandbox(id string) (*sandbox.Sandbox, error) { return s.pod.APISandbox(id) }

func (v sandboxService) CreateSandbox(ctx context.Context, req *sandboxapi.CreateSandboxRequest) (*sandboxapi.CreateSandboxResponse, error) {
	s := v.s
	if req.SandboxID == "" {
		return nil, fmt.Errorf("sandbox_id: empty: %w", errdefs.ErrInvalidArgument)
	}
	if len(req.Rootfs) > 0 {
		// containerd's CRI passes none (sandbox_run.go CreateSandbox has no rootfs option).
		return nil, fmt.Errorf("sandbox %s: rootfs: %d mounts: a sandbox runs no image here: %w", req.SandboxID, len(req.Rootfs), errdefs.ErrInvalidArgument)
	}
	opts, err := sandboxOptions(req.BundlePath)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", req.SandboxID, err)
	}
	applyLogLevel(ctx, opts)
	var cfg criapi.PodSandboxConfig
	if req.Options != nil {
		if err := req.Options.UnmarshalTo(&cfg); err != nil {
			return nil, fmt.Errorf("sandbox %s: options of type %q: want runtime.v1.PodSandboxConfig: %v: %w", req.SandboxID, req.Options.GetTypeUrl(), err, errdefs.ErrInvalidArgument)
		}
	}
	c := sandbox.Config{ID: req.SandboxID, Bundle: req.BundlePath, Kind: sandbox.KindProcess, NetNS: req.NetnsPath}
	if opts.GetSandboxIsolation() == options.Options_HYPERVISOR || cfg.GetAnnotations()[oci.AnnotationLegacyIsolation] == "hyperv" {
		c.Kind = sandbox.KindHyperV
		c.Pod, err = s.hyperVPod(req, opts, &cfg)
	} else {
		c.Pod, err = sandbox.NewProcessPod(req.NetnsPath)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", req.SandboxID, err)
	}
	if _, err := s.pod.CreateAPISandbox(ctx, c); err != nil {
		return nil, err
	}
	return &sandboxapi.CreateSandboxResponse{}, nil
}

// hyperVPod is the pod of a Hyper-V sandbox (sandbox.HyperVPod): its utility VM boots from the
// image the runtime option sandbox_image names (bootimage.go), is sized from the runtime
// options and the pod's annotations as a pause container's VM is (vmOptions), joins the pod's
// HNS namespace, and hosts the pod's containers (createHyperV, container-type container).
func (s *service) hyperVPod(req *sandboxapi.CreateSandboxRequest, opts *options.Options, cfg *criapi.PodSandboxConfig) (*sandbox.HyperVPod, error) {
	if err := sandbox.CheckNetNS(req.NetnsPath); err != nil {
		return nil, err
	}
	ref := opts.GetSandboxImage()
	if ref == "" {
		return nil, fmt.Errorf("runtime option sandbox_image (SandboxImage): empty: a Hyper-V pod through the sandbox API has no pause container, and its utility VM boots from that image's base layer (the CRI's sandbox image, pulled with disable_pause_image_pull = false): %w", errdefs.ErrInvalidArgument)
	}
	boot, err := s.bootImage(req.SandboxID, ref)
	if err != nil {
		return nil, err
	}
	// What sizes a pause container's VM: its spec's annotations (CRI copies the pod's) and
	// the runtime options.
	spec := &specs.Spec{Annotations: cfg.GetAnnotations()}
	id, bundle, netns := req.SandboxID, req.BundlePath, req.NetnsPath
	return sandbox.NewHyperVPod(bundle, boot, func(ctx context.Context, parents []string) (sandbox.PodVM, error) {
		o, err := s.vmOptions(ctx, id, spec, opts, parents, "")
		if err != nil {
			return nil, err
		}
		t, err := s.pod.CreateAPIVM(ctx, task.SandboxConfig{ID: id, Bundle: bundle, VM: o, NetworkNamespace: netns})
		if err != nil {
			return nil, err
		}
		return apiVM{pod: s.pod, t: t, timeout: s.deps.HCSTimeout}, nil
	})
}

// apiVM is a Hyper-V sandbox's utility VM, owned by a sandbox task containerd does not see
// (pod.CreateAPIVM).
type apiVM struct {
	pod     *pod.Pod
	t       *task.VMSandbox
	timeout time.Duration
}

func (v apiVM) Terminate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(v.timeout, task.HCSCallTimeout))
	defer cancel()
	return v.t.VM().Terminate(ctx)
}
func (v apiVM) Exited() <-chan struct{}                                   { return v.t.VM().Exited() }
func (v apiVM) Release(ctx context.Context) error                         { return v.pod.ReleaseAPIVM(ctx, v.t) }
func (v apiVM) Statistics(ctx context.Context) (*stats.Statistics, error) { return v.t.Stats(ctx) }

func (v sandboxService) StartSandbox(ctx context.Context, req *sandboxapi.StartSandboxRequest) (*sandboxapi.StartSandboxResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	pid, created, err := sb.Start(ctx)
	if err != nil {
		return nil, err
	}
	return &sandboxapi.StartSandboxResponse{Pid: pid, CreatedAt: timestamppb.New(created)}, nil
}

// Platform is the platform of the pod's containers: containerd's CRI builds their specs for it
// (container_create.go buildContainerSpec: windows → buildWindowsSpec).
func (v sandboxService) Platform(ctx context.Context, req *sandboxapi.PlatformRequest) (*sandboxapi.PlatformResponse, error) {
	if _, err := v.s.getSandbox(req.SandboxID); err != nil {
		return nil, err
	}
	return &sandboxapi.PlatformResponse{Platform: &types.Platform{OS: "windows", Architecture: goruntime.GOARCH}}, nil
}

func (v sandboxService) StopSandbox(ctx context.Context, req *sandboxapi.StopSandboxRequest) (*sandboxapi.StopSandboxResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	if req.TimeoutSecs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSecs)*time.Second)
		defer cancel()
	}
	if err := sb.Stop(ctx); err != nil {
		return nil, err
	}
	return &sandboxapi.StopSandboxResponse{}, nil
}

// WaitSandbox blocks until the sandbox has stopped (containerd's CRI calls it once, in a
// goroutine, right after StartSandbox: sandbox_run.go).
func (v sandboxService) WaitSandbox(ctx context.Context, req *sandboxapi.WaitSandboxRequest) (*sandboxapi.WaitSandboxResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	status, at, err := sb.Wait(ctx)
	if err != nil {
		return nil, err
	}
	return &sandboxapi.WaitSandboxResponse{ExitStatus: status, ExitedAt: timestamppb.New(at)}, nil
}

// SandboxStatus echoes the sandbox id, which containerd's CRI gives the pod's containers
// (container_create.go), and the state it parses as a CRI PodSandboxState.
func (v sandboxService) SandboxStatus(ctx context.Context, req *sandboxapi.SandboxStatusRequest) (*sandboxapi.SandboxStatusResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	st := sb.Status()
	resp := &sandboxapi.SandboxStatusResponse{SandboxID: st.ID, Pid: st.Pid, State: st.State, CreatedAt: timestamppb.New(st.CreatedAt)}
	if !st.ExitedAt.IsZero() {
		resp.ExitedAt = timestamppb.New(st.ExitedAt)
	}
	if req.Verbose {
		resp.Info = map[string]string{"kind": st.Kind, "netns": st.NetNS, "shim": RuntimeName}
	}
	return resp, nil
}

func (v sandboxService) PingSandbox(ctx context.Context, req *sandboxapi.PingRequest) (*sandboxapi.PingResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.Ping(); err != nil {
		return nil, err
	}
	return &sandboxapi.PingResponse{}, nil
}

// ShutdownSandbox stops and releases the sandbox; the shim then exits once no task is left
// (containerd waits for the connection to close, then deletes the bundle:
// core/runtime/v2/shim.go Delete).
func (v sandboxService) ShutdownSandbox(ctx context.Context, req *sandboxapi.ShutdownSandboxRequest) (*sandboxapi.ShutdownSandboxResponse, error) {
	s := v.s
	sb, err := s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.Shutdown(ctx); err != nil {
		return nil, err
	}
	s.pod.RemoveAPISandbox(sb)
	s.exitIfIdle(ctx)
	return &sandboxapi.ShutdownSandboxResponse{}, nil
}

// SandboxMetrics gives the pod's own statistics as containerd.runhcs.stats.v1.Statistics.
// containerd's Windows CRI does not call it (PodSandboxStats asks the task service for the
// sandbox id instead: service.go Stats); its Linux stats collector would, and expects cgroup
// metrics there.
func (v sandboxService) SandboxMetrics(ctx context.Context, req *sandboxapi.SandboxMetricsRequest) (*sandboxapi.SandboxMetricsResponse, error) {
	sb, err := v.s.getSandbox(req.SandboxID)
	if err != nil {
		return nil, err
	}
	st, err := sb.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	a, err := typeurl.MarshalAnyToProto(st)
	if err != nil {
		return nil, err
	}
	return &sandboxapi.SandboxMetricsResponse{Metrics: &types.Metric{Timestamp: timestamppb.Now(), ID: req.SandboxID, Data: a}}, nil
}

// UpdateSandbox is optional: containerd tolerates its absence (plugins/sandbox/controller.go
// Update).
func (v sandboxService) UpdateSandbox(ctx context.Context, req *sandboxapi.UpdateSandboxRequest) (*sandboxapi.UpdateSandboxResponse, error) {
	return nil, fmt.Errorf("update sandbox %s: %w", req.SandboxID, errdefs.ErrNotImplemented)
}
