package shim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sandboxapi "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

const podNetNS = "0b6c5f2e-1d3a-4e5f-9a8b-7c6d5e4f3a2b"

// sandboxRequest is what containerd's sandbox controller sends for a CRI pod
// (plugins/sandbox/controller.go Create): a bundle without config.json, the PodSandboxConfig
// as options, the HNS namespace CRI made, no rootfs.
func (h *harness) sandboxRequest(id string, cfg *criapi.PodSandboxConfig) *sandboxapi.CreateSandboxRequest {
	h.t.Helper()
	b := filepath.Join(h.dir, id)
	if err := os.MkdirAll(b, 0o755); err != nil {
		h.t.Fatal(err)
	}
	a, err := anypb.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return &sandboxapi.CreateSandboxRequest{SandboxID: id, BundlePath: b, Options: a, NetnsPath: podNetNS}
}

func TestSandboxAPI(t *testing.T) {
	h := newHarness(t)
	sd := newFakeShutdown()
	h.svc.shutdown = sd
	sv := sandboxService{h.svc}
	ctx := context.Background()
	cfg := &criapi.PodSandboxConfig{Metadata: &criapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u"}}
	req := h.sandboxRequest("pod1", cfg)
	if _, err := sv.CreateSandbox(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !sandbox.IsBundle(req.BundlePath) {
		t.Fatal("CreateSandbox recorded no state in the bundle")
	}
	st, err := sv.SandboxStatus(ctx, &sandboxapi.SandboxStatusRequest{SandboxID: "pod1"})
	if err != nil || st.SandboxID != "pod1" || st.State != sandbox.StateNotReady {
		t.Fatalf("status before start: %v %v", st, err)
	}
	start, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod1"})
	if err != nil || start.Pid == 0 || start.CreatedAt == nil {
		t.Fatalf("StartSandbox: %v %v", start, err)
	}
	p, err := sv.Platform(ctx, &sandboxapi.PlatformRequest{SandboxID: "pod1"})
	if err != nil || p.Platform.OS != "windows" {
		t.Fatalf("Platform: %v %v", p, err)
	}
	st, err = sv.SandboxStatus(ctx, &sandboxapi.SandboxStatusRequest{SandboxID: "pod1", Verbose: true})
	if err != nil || st.SandboxID != "pod1" || st.State != sandbox.StateReady || st.Pid != start.Pid || st.Info["netns"] != podNetNS || st.ExitedAt != nil {
		t.Fatalf("status: %v %v", st, err)
	}
	if _, err := sv.PingSandbox(ctx, &sandboxapi.PingRequest{SandboxID: "pod1"}); err != nil {
		t.Fatal(err)
	}
	// The pod's statistics, as SandboxMetrics and as the task Stats containerd's Windows CRI
	// asks of the sandbox id.
	m, err := sv.SandboxMetrics(ctx, &sandboxapi.SandboxMetricsRequest{SandboxID: "pod1"})
	if err != nil || m.Metrics.ID != "pod1" {
		t.Fatalf("SandboxMetrics: %v %v", m, err)
	}
	ts, err := h.svc.Stats(ctx, &taskapi.StatsRequest{ID: "pod1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*anypb.Any{m.Metrics.Data, ts.Stats} {
		v, err := typeurl.UnmarshalAny(a)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := v.(*stats.Statistics); !ok || s.GetWindows().GetMemory() == nil {
			t.Fatalf("pod statistics: %T %v", v, v)
		}
	}

	// A container of the pod joins it as a task.
	spec := testSpec()
	spec.Process.Args = []string{`C:\workload\workload.exe`, "sleep", "3600"}
	spec.Annotations = map[string]string{oci.AnnotationContainerType: "container", oci.AnnotationSandboxID: "pod1"}
	spec.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: podNetNS}
	if _, err := h.svc.Create(ctx, h.bundle("c1", spec)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}

	waited := make(chan *sandboxapi.WaitSandboxResponse, 1)
	go func() {
		w, err := sv.WaitSandbox(ctx, &sandboxapi.WaitSandboxRequest{SandboxID: "pod1"})
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	// StopPodSandbox: CRI stops the containers, then the sandbox.
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.StopSandbox(ctx, &sandboxapi.StopSandboxRequest{SandboxID: "pod1"}); err != nil {
		t.Fatal(err)
	}
	if w := <-waited; w == nil || w.ExitedAt == nil {
		t.Fatalf("WaitSandbox: %v", w)
	}
	st, err = sv.SandboxStatus(ctx, &sandboxapi.SandboxStatusRequest{SandboxID: "pod1"})
	if err != nil || st.State != sandbox.StateNotReady || st.ExitedAt == nil {
		t.Fatalf("status after stop: %v %v", st, err)
	}
	// A stopped sandbox takes no new container.
	_, err = h.svc.Create(ctx, h.bundle("c2", spec))
	if err == nil || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Create in a stopped sandbox: %v", err)
	}

	// The container's delete and Shutdown leave the shim to the sandbox.
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if sd.endsAfter(t, func(ctx context.Context) error {
		_, err := h.svc.Shutdown(ctx, &taskapi.ShutdownRequest{ID: "c1"})
		return err
	}) {
		t.Fatal("the shim exited while it still served the sandbox")
	}
	if !sd.endsAfter(t, func(ctx context.Context) error {
		_, err := sv.ShutdownSandbox(ctx, &sandboxapi.ShutdownSandboxRequest{SandboxID: "pod1"})
		return err
	}) {
		t.Fatal("the shim did not exit after ShutdownSandbox")
	}
	if sandbox.IsBundle(req.BundlePath) {
		t.Fatal("ShutdownSandbox left the sandbox state")
	}
	if _, err := sv.SandboxStatus(ctx, &sandboxapi.SandboxStatusRequest{SandboxID: "pod1"}); !errdefs.IsNotFound(err) {
		t.Fatalf("status after shutdown: %v", err)
	}
}

func TestCreateSandboxRefuses(t *testing.T) {
	ctx := context.Background()
	hyperv, err := typeurl.MarshalAnyToProto(&options.Options{SandboxIsolation: options.Options_HYPERVISOR})
	if err != nil {
		t.Fatal(err)
	}
	rawHyperV, err := proto.Marshal(hyperv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		edit  func(h *harness, r *sandboxapi.CreateSandboxRequest)
		kind  func(error) bool
		field string
	}{
		{"no id", func(_ *harness, r *sandboxapi.CreateSandboxRequest) { r.SandboxID = "" }, errdefs.IsInvalidArgument, "sandbox_id"},
		{"bad netns", func(_ *harness, r *sandboxapi.CreateSandboxRequest) { r.NetnsPath = "/var/run/netns/cni-1" }, errdefs.IsInvalidArgument, `netns_path "/var/run/netns/cni-1"`},
		{"rootfs", func(_ *harness, r *sandboxapi.CreateSandboxRequest) {
			r.Rootfs = []*types.Mount{{Type: "windows-layer"}}
		}, errdefs.IsInvalidArgument, "rootfs"},
		{"options type", func(_ *harness, r *sandboxapi.CreateSandboxRequest) { r.Options = hyperv }, errdefs.IsInvalidArgument, "PodSandboxConfig"},
		{"hyper-v options", func(h *harness, r *sandboxapi.CreateSandboxRequest) {
			// What the start action kept from its stdin for runhcs-wcow-hypervisor.
			if err := recordSandboxOptions(r.BundlePath, rawHyperV); err != nil {
				h.t.Fatal(err)
			}
		}, errdefs.IsInvalidArgument, "sandbox_image"},
		{"hyper-v annotation", func(h *harness, r *sandboxapi.CreateSandboxRequest) {
			a, err := anypb.New(&criapi.PodSandboxConfig{Annotations: map[string]string{oci.AnnotationLegacyIsolation: "hyperv"}})
			if err != nil {
				h.t.Fatal(err)
			}
			r.Options = a
		}, errdefs.IsInvalidArgument, "sandbox_image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.sandboxRequest("pod1", &criapi.PodSandboxConfig{})
			c.edit(h, r)
			_, err := sandboxService{h.svc}.CreateSandbox(ctx, r)
			if err == nil || !c.kind(err) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("CreateSandbox: %v; want one naming %q", err, c.field)
			}
			if sandbox.IsBundle(r.BundlePath) || h.svc.pod.Len() > 0 {
				t.Fatal("a refused CreateSandbox left a sandbox")
			}
		})
	}
	t.Run("second sandbox", func(t *testing.T) {
		h := newHarness(t)
		sv := sandboxService{h.svc}
		if _, err := sv.CreateSandbox(ctx, h.sandboxRequest("pod1", &criapi.PodSandboxConfig{})); err != nil {
			t.Fatal(err)
		}
		if _, err := sv.CreateSandbox(ctx, h.sandboxRequest("pod2", &criapi.PodSandboxConfig{})); !errdefs.IsAlreadyExists(err) {
			t.Fatalf("second CreateSandbox: %v", err)
		}
		if _, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod2"}); !errdefs.IsNotFound(err) {
			t.Fatalf("StartSandbox of another id: %v", err)
		}
	})
}

// The start action keeps the runtime options only for a bundle without config.json, which is
// how a sandbox-API bundle looks; a task's bundle gets them in its Create request.
func TestRecordSandboxOptions(t *testing.T) {
	raw := []byte("\x0a\x01x")
	sb := t.TempDir()
	if err := recordSandboxOptions(sb, raw); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(sb, sandboxOptionsFile)); err != nil || string(b) != string(raw) {
		t.Fatalf("sandbox bundle: %q %v", b, err)
	}
	tb := t.TempDir()
	if err := os.WriteFile(filepath.Join(tb, "config.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := recordSandboxOptions(tb, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tb, sandboxOptionsFile)); !os.IsNotExist(err) {
		t.Fatalf("a task bundle got the options file: %v", err)
	}
}

// The delete action, run by containerd after a sandbox's shim was killed, removes what the
// sandbox left.
func TestDeleteActionAfterKilledSandboxShim(t *testing.T) {
	h := newHarness(t)
	sv := sandboxService{h.svc}
	ctx := context.Background()
	req := h.sandboxRequest("pod1", &criapi.PodSandboxConfig{})
	if _, err := sv.CreateSandbox(ctx, req); err != nil {
		t.Fatal(err)
	}
	start, err := sv.StartSandbox(ctx, &sandboxapi.StartSandboxRequest{SandboxID: "pod1"})
	if err != nil {
		t.Fatal(err)
	}
	// The shim is killed here.
	dctx := context.WithValue(ctx, cshim.OptsKey{}, cshim.Opts{BundlePath: req.BundlePath})
	st, err := (&manager{name: RuntimeName}).Stop(dctx, "pod1")
	if err != nil || uint32(st.Pid) != start.Pid || st.ExitStatus != deleteExitStatus {
		t.Fatalf("delete action: %+v %v", st, err)
	}
	if sandbox.IsBundle(req.BundlePath) {
		t.Fatal("the delete action left the sandbox state")
	}
}
