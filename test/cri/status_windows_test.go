//go:build windows

package cri

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRuntimeStatus reads CRI's Status as kubelet does at start and on every sync: the runtime
// and the network (win-bridge's configuration loaded) are ready, the verbose configuration is
// the node's (runhcs the default handler, a Hyper-V handler with SandboxIsolation 1, both on
// the node's snapshotter: what containerd read from its version's TOML, test/winnode's
// ContainerdConfig), and the runtime handlers kubelet learns features from.
func TestRuntimeStatus(t *testing.T) {
	n := connect(t)
	st, err := n.rt.Status(ctx(t), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		i := slices.IndexFunc(st.GetStatus().GetConditions(), func(c *runtimeapi.RuntimeCondition) bool { return c.GetType() == want })
		if i < 0 || !st.GetStatus().GetConditions()[i].GetStatus() {
			t.Errorf("Status conditions %v: want %s true", st.GetStatus().GetConditions(), want)
		}
	}
	if !strings.Contains(st.GetInfo()["cniconfig"], `"Name":"winnode"`) {
		t.Errorf("Status cniconfig %q: want the node's network winnode", st.GetInfo()["cniconfig"])
	}
	// The same JSON names in 1.7.35's pkg/cri/config and 2.4.2's internal/cri/config.
	var cfg struct {
		Containerd struct {
			DefaultRuntimeName string `json:"defaultRuntimeName"`
			Runtimes           map[string]struct {
				Type        string         `json:"runtimeType"`
				Snapshotter string         `json:"snapshotter"`
				Options     map[string]any `json:"options"`
			} `json:"runtimes"`
		} `json:"containerd"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg); err != nil {
		t.Fatalf("Status config %q: %v", st.GetInfo()["config"], err)
	}
	if cfg.Containerd.DefaultRuntimeName != "runhcs-wcow-process" {
		t.Errorf("default runtime %q, want runhcs-wcow-process", cfg.Containerd.DefaultRuntimeName)
	}
	snapshotter := os.Getenv("RUNHCS_NODE_SNAPSHOTTER")
	for name, isolation := range map[string]float64{"runhcs-wcow-process": 0, "runhcs-wcow-hypervisor": 1} {
		r, ok := cfg.Containerd.Runtimes[name]
		if !ok || r.Type != "io.containerd.runhcs.v1" || r.Snapshotter != snapshotter || r.Options["SandboxIsolation"] != isolation {
			t.Errorf("runtime %s: %+v (present %v); want io.containerd.runhcs.v1 on %q with SandboxIsolation %v", name, r, ok, snapshotter, isolation)
		}
	}
	var handlers []string
	for _, h := range st.GetRuntimeHandlers() {
		handlers = append(handlers, h.GetName())
	}
	want := []string{"", hypervHandler, "runhcs-wcow-process"} // "" is the default handler
	if shimSandboxer(t) {
		// The pause-container handlers beside the shim sandboxer's (test/winnode config.go).
		want = []string{"", hypervHandler, hypervPodsandboxHandler, "runhcs-wcow-process", podsandboxHandler}
	}
	if containerd17(t, n) {
		// containerd 1.7 answers no runtime handlers: 1.7.35's pkg/cri/server/status.go does not
		// fill StatusResponse.runtime_handlers (2.x's introspectRuntimeHandler does), so kubelet
		// sees no handler features from it.
		want = nil
	}
	if !slices.Equal(handlers, want) {
		t.Errorf("Status runtime handlers %q, want %q", handlers, want)
	}
}
