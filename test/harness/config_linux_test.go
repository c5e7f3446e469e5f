package harness

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestContainerdConfig(t *testing.T) {
	base := configParams{
		Root: "/r/root", State: "/r/state", Temp: "/r/tmp", Address: "/r/c.sock", TTRPCAddress: "/r/c.sock.ttrpc",
		DebugAddress: "/r/d.sock", SnapshotterAddr: "/r/wcow.sock", OptDir: "/r/opt",
	}
	tests := []struct {
		name        string
		version     string
		cri         bool
		wantVersion int64
		wantErr     string
	}{
		{name: "containerd 2", version: "2", wantVersion: 3},
		{name: "containerd 1.7", version: "1.7", wantVersion: 2},
		{name: "containerd 2 with CRI", version: "2", cri: true, wantVersion: 3},
		{name: "unknown", version: "1.6", wantErr: `containerd version "1.6"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			p.Version, p.EnableCRI = tt.version, tt.cri
			p.Extra = `[plugins."io.containerd.gc.v1.scheduler"]` + "\n  pause_threshold = 0.02"
			text, err := containerdConfig(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := toml.Unmarshal([]byte(text), &cfg); err != nil {
				t.Fatalf("config is not valid TOML: %v\n%s", err, text)
			}
			if cfg["version"] != tt.wantVersion {
				t.Errorf("version = %v, want %d", cfg["version"], tt.wantVersion)
			}
			if cfg["root"] != "/r/root" || cfg["state"] != "/r/state" {
				t.Errorf("root/state = %v/%v", cfg["root"], cfg["state"])
			}
			grpc := cfg["grpc"].(map[string]any)
			if grpc["address"] != "/r/c.sock" {
				t.Errorf("grpc address = %v", grpc["address"])
			}
			proxies := cfg["proxy_plugins"].(map[string]any)
			for name, typ := range map[string]string{Snapshotter: "snapshot", Differ: "diff"} {
				pp, ok := proxies[name].(map[string]any)
				if !ok {
					t.Fatalf("proxy plugin %s missing", name)
				}
				if pp["type"] != typ || pp["address"] != "/r/wcow.sock" || pp["platform"] != Platform {
					t.Errorf("proxy plugin %s = %v", name, pp)
				}
			}
			plugins := cfg["plugins"].(map[string]any)
			diff := plugins["io.containerd.service.v1.diff-service"].(map[string]any)
			if d := diff["default"].([]any); len(d) == 0 || d[0] != Differ {
				t.Errorf("diff-service default = %v, want %s first", d, Differ)
			}
			// Both versions' transfer services read unpack_config: a Linux entry (defining the
			// list replaces containerd's default) and the Windows one on the wcow plugins.
			transfer, _ := plugins["io.containerd.transfer.v1.local"].(map[string]any)
			unpack, _ := transfer["unpack_config"].([]any)
			want := []map[string]any{
				{"platform": "linux/amd64", "snapshotter": "overlayfs", "differ": "walking"},
				{"platform": Platform, "snapshotter": Snapshotter, "differ": Differ},
			}
			if len(unpack) != len(want) {
				t.Fatalf("transfer unpack_config = %v, want %v", unpack, want)
			}
			for i, w := range want {
				got, _ := unpack[i].(map[string]any)
				for k, v := range w {
					if got[k] != v {
						t.Errorf("unpack_config[%d].%s = %v, want %v", i, k, got[k], v)
					}
				}
			}
			if _, ok := plugins["io.containerd.gc.v1.scheduler"]; !ok {
				t.Errorf("extra config was not appended")
			}
			disabled := strings.Join(toStrings(cfg["disabled_plugins"]), ",")
			if strings.Contains(disabled, "io.containerd.grpc.v1.cri") == tt.cri {
				t.Errorf("disabled_plugins = %s with CRI %v", disabled, tt.cri)
			}
			if !strings.Contains(disabled, "io.containerd.nri.v1.nri") {
				t.Errorf("NRI not disabled: %s", disabled)
			}
		})
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestMountinfoUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`: "/tmp/a b",
		`/plain`:      "/plain",
		`/x\134y`:     `/x\y`,
		`/end\04`:     `/end\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestZombie(t *testing.T) {
	for stat, want := range map[string]bool{
		"12 (sh) S 1 12":          false,
		"13 (a) b) Z 1 13":        true,
		"14 (workload.exe) R 1 1": false,
	} {
		if got := zombie([]byte(stat)); got != want {
			t.Errorf("zombie(%q) = %v, want %v", stat, got, want)
		}
	}
}
