//go:build !windows

package shim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
)

// TestJoinPodShim: a task whose spec names a pod's sandbox gets the address of the shim
// already serving that pod, and no new shim is started.
func TestJoinPodShim(t *testing.T) {
	dir := t.TempDir()
	defer func(r string) { socketRoot = r }(socketRoot)
	socketRoot = filepath.Join(dir, "s")
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	f := startFlags{namespace: "k8s.io", id: "app", address: "/run/containerd/containerd.sock"}

	// The pod's shim, serving on the socket of group "sandbox1".
	podAddr, err := cshim.CreateSocketAddress(ctx, socketRoot, f.address, "sandbox1", false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cshim.NewSocket(podAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	bundle := filepath.Join(dir, "app")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"annotations": map[string]string{"io.kubernetes.cri.sandbox-id": "sandbox1"}})
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
	got, err := startOrJoin(ctx, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if got != podAddr {
		t.Errorf("address %s, want the pod shim's %s", got, podAddr)
	}
	if b, _ := os.ReadFile(filepath.Join(bundle, "address")); string(b) != podAddr {
		t.Errorf("address file %q", b)
	}
	if !strings.HasPrefix(got, "unix://") {
		t.Errorf("address %s is not a unix socket URI", got)
	}
}

func TestShimGroup(t *testing.T) {
	dir := t.TempDir()
	if g := shimGroup(dir, "c1"); g != "c1" {
		t.Errorf("no spec: group %q", g)
	}
	_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"annotations":{"io.kubernetes.cri.sandbox-id":"pod"}}`), 0o644)
	if g := shimGroup(dir, "c1"); g != "pod" {
		t.Errorf("group %q, want pod", g)
	}
}
