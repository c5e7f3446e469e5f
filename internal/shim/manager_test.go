package shim

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/shim/sandbox"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestDeleteActionCleansJoinedTasks: under bootstrap version 3 containerd 2.x hands a pod's
// other containers to the pod's shim without a start run, writing the pod's id in their
// bundle's sandbox file, and runs no delete action for them when the shim dies; the delete
// action of the pod's own bundle (a pause container's task bundle, or a sandbox-API sandbox's
// in the shim sandbox controller's folder) cleans them up. Tasks of other pods and tasks that
// had a start run of their own (no sandbox file) are left to their own delete action.
func TestDeleteActionCleansJoinedTasks(t *testing.T) {
	for _, kind := range []string{"pause container", "sandbox API"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			state := filepath.Join(h.dir, "state")
			tasks := filepath.Join(state, taskBundles, "k8s.io")
			h.dir = tasks
			var podBundle string
			switch kind {
			case "pause container":
				req := h.bundle("pod", testSpec())
				h.createStart(req)
				podBundle = req.Bundle
			case "sandbox API":
				h.dir = filepath.Join(state, "io.containerd.sandbox.controller.v1.shim", "k8s.io")
				req := h.sandboxRequest("pod", &criapi.PodSandboxConfig{})
				h.dir = tasks
				sv := sandboxService{h.svc}
				if _, err := sv.CreateSandbox(context.Background(), req); err != nil {
					t.Fatal(err)
				}
				podBundle = req.BundlePath
			}
			for id, pod := range map[string]string{"c1": "pod", "c2": "other", "c3": ""} {
				req := h.bundle(id, testSpec())
				h.createStart(req)
				if pod != "" {
					if err := os.WriteFile(filepath.Join(req.Bundle, joinedBundleSandboxFile), []byte(pod), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The shim is killed here; containerd runs the delete action in the pod's bundle.
			if _, err := cleanupBundle(context.Background(), h.svc.deps, "pod", podBundle); err != nil {
				t.Fatalf("delete action: %v", err)
			}
			// A terminated fake system leaves the host.
			if kind == "pause container" && h.host.system("pod") != nil {
				t.Error("the pod's own compute system was not terminated")
			}
			if kind == "sandbox API" && sandbox.IsBundle(podBundle) {
				t.Error("the sandbox state was left")
			}
			for id, want := range map[string]bool{"c1": true, "c2": false, "c3": false} {
				if got := h.host.system(id) == nil; got != want {
					t.Errorf("task %s terminated by the pod's delete action: %v, want %v", id, got, want)
				}
			}
		})
	}
}
