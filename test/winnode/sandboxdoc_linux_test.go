package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

// TestSandboxAPIDocConfig checks that docs/sandbox-api.md shows the configuration the node
// runs with --sandboxer shim (containerd 2.x), as TestDocsConfig does for docs/install-windows.md.
func TestSandboxAPIDocConfig(t *testing.T) {
	page, err := os.ReadFile("../../docs/sandbox-api.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(page), "```toml\n")
	if len(parts) != 2 {
		t.Fatalf("docs/sandbox-api.md: %d TOML blocks, want 1", len(parts)-1)
	}
	block, _, _ := strings.Cut(parts[1], "```")
	var got, want map[string]any
	if err := toml.Unmarshal([]byte(block), &got); err != nil {
		t.Fatalf("docs/sandbox-api.md: %v", err)
	}
	const folder = `C:\Program Files\containerd\`
	node := ContainerdConfig(ConfigOptions{Containerd: "2", Snapshotter: "wcow", Sandboxer: "shim",
		CNIBin: folder + `cni\bin`, CNIConf: folder + `cni\conf`, Hosts: folder + `certs.d`,
		SnapshotterRoot: `C:\ProgramData\containerd-wcow-snapshotter`})
	if err := toml.Unmarshal([]byte(node), &want); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"root", "state", "grpc"} {
		delete(want, k)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/sandbox-api.md's configuration differs from the node's:\npage: %v\nnode: %v", got, want)
	}
}

// TestSandboxerConfig: the process and Hyper-V handlers get the shim sandboxer, only on 2.x,
// the Hyper-V one with the CRI's pause image pulled and named as its VM's boot image, each with
// a handler on the pause container beside it, and a node refuses --sandboxer shim with
// containerd 1.7.
func TestSandboxerConfig(t *testing.T) {
	var c map[string]any
	if err := toml.Unmarshal([]byte(ContainerdConfig(ConfigOptions{Containerd: "2", Snapshotter: "wcow", Sandboxer: "shim"})), &c); err != nil {
		t.Fatal(err)
	}
	runtimes := c["plugins"].(map[string]any)["io.containerd.cri.v1.runtime"].(map[string]any)["containerd"].(map[string]any)["runtimes"].(map[string]any)
	p, h := runtimes["runhcs-wcow-process"].(map[string]any), runtimes["runhcs-wcow-hypervisor"].(map[string]any)
	if p["sandboxer"] != "shim" || p["disable_pause_image_pull"] != true {
		t.Errorf("process handler: %v", p)
	}
	if h["sandboxer"] != "shim" || h["disable_pause_image_pull"] != false || h["options"].(map[string]any)["SandboxImage"] != SandboxImage {
		t.Errorf("hypervisor handler: %v", h)
	}
	// The pause-container handlers beside them: no sandboxer of their own.
	for name, isolation := range map[string]int64{"runhcs-wcow-process-podsandbox": 0, "runhcs-wcow-hypervisor-podsandbox": 1} {
		pp, ok := runtimes[name].(map[string]any)
		if _, shim := pp["sandboxer"]; !ok || shim || pp["options"].(map[string]any)["SandboxIsolation"] != isolation {
			t.Errorf("%s handler: %v", name, pp)
		}
	}
	for _, o := range []ConfigOptions{{Containerd: "2", Snapshotter: "wcow"}, {Containerd: "1.7", Snapshotter: "wcow"}} {
		if cfg := ContainerdConfig(o); strings.Contains(cfg, "-podsandbox") || strings.Contains(cfg, "SandboxImage") {
			t.Errorf("containerd %s without --sandboxer shim has the podsandbox handler: %s", o.Containerd, cfg)
		}
	}
	for _, o := range []ConfigOptions{{Containerd: "2", Snapshotter: "wcow"}, {Containerd: "1.7", Snapshotter: "wcow"}} {
		if cfg := ContainerdConfig(o); strings.Contains(cfg, "sandboxer") {
			t.Errorf("containerd %s without --sandboxer shim: %s", o.Containerd, cfg)
		}
	}
	f := nodeFlags{root: "/r", bin: "/b", prefix: "/p", snapshotter: "wcow", containerd: "1.7", sandboxer: "shim"}
	if err := f.validate(); err == nil || !strings.Contains(err.Error(), "containerd 1.7 has no sandbox API") {
		t.Errorf("--containerd 1.7 --sandboxer shim: %v", err)
	}
	f.sandboxer = "pause"
	if err := f.validate(); err == nil || !strings.Contains(err.Error(), `--sandboxer "pause"`) {
		t.Errorf("--sandboxer pause: %v", err)
	}
}
