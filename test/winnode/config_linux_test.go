//go:build linux

package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// lookup walks the decoded TOML tree along keys.
func lookup(tree map[string]any, keys ...string) any {
	var v any = tree
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestContainerdConfig decodes the node's configuration for each containerd line and checks
// that the settings sit under that version's plugin names (1.7.35's pkg/cri/config and
// 2.4.2's internal/cri/config), so that neither version silently ignores a table.
func TestContainerdConfig(t *testing.T) {
	o := ConfigOptions{Root: `Z:\r`, State: `Z:\s`, Snapshotter: "wcow", CNIBin: `Z:\cni\bin`, CNIConf: `Z:\cni\conf`, Hosts: `Z:\certs.d`}
	for _, tc := range []struct {
		containerd string
		version    int64
		runtimes   []string // the CRI plugin's containerd table
		checks     map[string]any
		absent     string // a plugin that version does not have ("" for none: 2.x keeps io.containerd.grpc.v1.cri for the server settings, checked above)
	}{
		{"2", 3, []string{"io.containerd.cri.v1.runtime", "containerd"}, map[string]any{
			"io.containerd.cri.v1.images/snapshotter":                      "wcow",
			"io.containerd.cri.v1.images/registry/config_path":             `Z:\certs.d`,
			"io.containerd.cri.v1.runtime/cni/conf_dir":                    `Z:\cni\conf`,
			"io.containerd.transfer.v1.local/unpack_config":                nil, // present
			"io.containerd.service.v1.diff-service/default":                nil,
			"io.containerd.cri.v1.runtime/containerd/snapshotter":          "<absent>",
			"io.containerd.cri.v1.runtime/containerd/default_runtime_name": "runhcs-wcow-process",
			// In 2.x io.containerd.grpc.v1.cri keeps only the CRI server's own settings
			// (2.4.2's internal/cri/config ServerConfig), such as the streaming server's.
			"io.containerd.grpc.v1.cri/stream_server_address": "127.0.0.1",
			"io.containerd.grpc.v1.cri/stream_server_port":    "0",
			"io.containerd.grpc.v1.cri/containerd":            "<absent>",
			"io.containerd.grpc.v1.cri/registry":              "<absent>",
			"io.containerd.grpc.v1.cri/cni":                   "<absent>",
			"io.containerd.grpc.v1.cri/sandbox_image":         "<absent>",
		}, ""},
		{"1.7", 2, []string{"io.containerd.grpc.v1.cri", "containerd"}, map[string]any{
			"io.containerd.grpc.v1.cri/containerd/snapshotter":          "wcow",
			"io.containerd.grpc.v1.cri/registry/config_path":            `Z:\certs.d`,
			"io.containerd.grpc.v1.cri/cni/bin_dir":                     `Z:\cni\bin`,
			"io.containerd.grpc.v1.cri/cni/conf_dir":                    `Z:\cni\conf`,
			"io.containerd.grpc.v1.cri/sandbox_image":                   SandboxImage,
			"io.containerd.transfer.v1.local/unpack_config":             nil,
			"io.containerd.service.v1.diff-service/default":             nil,
			"io.containerd.grpc.v1.cri/containerd/default_runtime_name": "runhcs-wcow-process",
			"io.containerd.grpc.v1.cri/stream_server_address":           "127.0.0.1",
			"io.containerd.grpc.v1.cri/stream_server_port":              "0",
		}, "io.containerd.cri.v1.runtime"},
	} {
		t.Run(tc.containerd, func(t *testing.T) {
			o.Containerd = tc.containerd
			cfg := ContainerdConfig(o)
			var tree map[string]any
			if err := toml.Unmarshal([]byte(cfg), &tree); err != nil {
				t.Fatalf("%v\n%s", err, cfg)
			}
			if v := tree["version"]; v != tc.version {
				t.Errorf("version = %v, want %d", v, tc.version)
			}
			if got := lookup(tree, "grpc", "address"); got != Pipe {
				t.Errorf("grpc.address = %v, want %s", got, Pipe)
			}
			plugins, _ := tree["plugins"].(map[string]any)
			for path, want := range tc.checks {
				got := lookup(plugins, strings.Split(path, "/")...)
				switch {
				case want == "<absent>" && got != nil:
					t.Errorf("plugins.%s = %v, want none", path, got)
				case want == nil && got == nil:
					t.Errorf("plugins.%s: missing", path)
				case want != nil && want != "<absent>" && got != want:
					t.Errorf("plugins.%s = %v, want %v", path, got, want)
				}
			}
			if tc.absent != "" && plugins[tc.absent] != nil {
				t.Errorf("plugins.%s is set: not containerd %s's plugin", tc.absent, tc.containerd)
			}
			for handler, isolation := range map[string]int64{"runhcs-wcow-process": 0, "runhcs-wcow-hypervisor": 1} {
				rt := append(append([]string{}, tc.runtimes...), "runtimes", handler)
				if got := lookup(plugins, append(rt, "runtime_type")...); got != "io.containerd.runhcs.v1" {
					t.Errorf("%s runtime_type = %v", handler, got)
				}
				if got := lookup(plugins, append(rt, "snapshotter")...); got != "wcow" {
					t.Errorf("%s snapshotter = %v", handler, got)
				}
				if got := lookup(plugins, append(rt, "options", "SandboxIsolation")...); got != isolation {
					t.Errorf("%s SandboxIsolation = %v, want %d", handler, got, isolation)
				}
			}
			if got := lookup(tree, "proxy_plugins", "wcow", "address"); got != wcowPipe {
				t.Errorf("proxy_plugins.wcow.address = %v, want %s", got, wcowPipe)
			}
		})
	}
	// The built-in snapshotter: no proxy plugins.
	o.Containerd, o.Snapshotter = "1.7", "windows"
	if cfg := ContainerdConfig(o); strings.Contains(cfg, "proxy_plugins") || !strings.Contains(cfg, "snapshotter = 'windows'") {
		t.Errorf("--snapshotter windows:\n%s", cfg)
	}
}

// TestServerVersion reads the server's version from `ctr version` as ctr.exe prints it.
func TestServerVersion(t *testing.T) {
	out := "Client:\r\n  Version:  v1.7.35\r\n  Revision: \r\n  Go version: go1.26.8\r\n\r\nServer:\r\n  Version:  v1.7.35\r\n  Revision: \r\n  UUID: 0b8f\r\n"
	if v, err := serverVersion(out); err != nil || v != "v1.7.35" {
		t.Errorf("serverVersion = %q, %v; want v1.7.35", v, err)
	}
	if _, err := serverVersion("Client:\n  Version:  v2.4.2\n"); err == nil {
		t.Error("serverVersion without a Server section: no error")
	}
	for _, c := range []struct {
		version, line string
		want          bool
	}{{"v2.4.2", "2", true}, {"v1.7.35", "1.7", true}, {"v1.7.35", "2", false}, {"v2.4.2", "1.7", false}, {"v1.70.0", "1.7", false}} {
		if got := versionMatches(c.version, c.line); got != c.want {
			t.Errorf("versionMatches(%s, %s) = %v", c.version, c.line, got)
		}
	}
}

// TestDocsConfig checks that the containerd configurations of docs/install-windows.md (its
// "containerd configuration" section, one TOML block per version) are the node's, with that
// page's folders: the configuration the node runs is the one users are told to copy.
func TestDocsConfig(t *testing.T) {
	const page = "docs/install-windows.md"
	text, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{} // by their first line, "version = N"
	for _, part := range strings.Split(string(text), "```toml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		first, _, _ := strings.Cut(block, "\n")
		if _, ok := blocks[first]; !ok {
			blocks[first] = block
		}
	}
	const folder = `C:\Program Files\containerd\`
	for containerd, first := range map[string]string{"2": "version = 3", "1.7": "version = 2"} {
		block, ok := blocks[first]
		if !ok {
			t.Errorf("%s: no TOML block starting %q (containerd %s)", page, first, containerd)
			continue
		}
		var got, want map[string]any
		if err := toml.Unmarshal([]byte(block), &got); err != nil {
			t.Fatalf("%s: the %s block: %v", page, first, err)
		}
		node := ContainerdConfig(ConfigOptions{Containerd: containerd, Snapshotter: "wcow",
			CNIBin: folder + `cni\bin`, CNIConf: folder + `cni\conf`, Hosts: folder + `certs.d`,
			SnapshotterRoot: `C:\ProgramData\containerd-wcow-snapshotter`})
		if err := toml.Unmarshal([]byte(node), &want); err != nil {
			t.Fatal(err)
		}
		// The node's own folders and pipe, which the page leaves at containerd's defaults.
		for _, k := range []string{"root", "state", "grpc"} {
			delete(want, k)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the containerd %s configuration differs from the node's:\npage: %v\nnode: %v", page, containerd, got, want)
		}
	}
}

// TestNodeRegistry: the node's registry file carries every value kubelet.exe reads at start
// (k8s.io/kubernetes v1.37.2 pkg/kubelet/winstats), with their types, and refuses a build or
// UUID it cannot write.
func TestNodeRegistry(t *testing.T) {
	reg, err := nodeRegistry("10.0.20348.1", "3F2504E0-4F89-11D3-9A0C-0305E82C3301", 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[HKEY_LOCAL_MACHINE\\Software\\Microsoft\\Windows NT\\CurrentVersion]\r\n",
		"\"CurrentBuildNumber\"=\"20348\"\r\n",
		"\"CurrentMajorVersionNumber\"=dword:0000000a\r\n",
		"\"CurrentMinorVersionNumber\"=dword:00000000\r\n",
		"\"UBR\"=dword:00000001\r\n",
		"\"ProductName\"=\"Windows Server 2022 Datacenter\"\r\n",
		"[HKEY_LOCAL_MACHINE\\System\\HardwareConfig]\r\n\"LastConfig\"=\"{3f2504e0-4f89-11d3-9a0c-0305e82c3301}\"\r\n",
		"[HKEY_LOCAL_MACHINE\\System\\CurrentControlSet\\Control\\Session Manager\\Memory Management\\PrefetchParameters]\r\n\"BootId\"=dword:00000007\r\n",
	} {
		if !strings.Contains(reg, want) {
			t.Errorf("the registry file lacks %q:\n%s", want, reg)
		}
	}
	if _, err := nodeRegistry("10.0.20348", "3F2504E0-4F89-11D3-9A0C-0305E82C3301", 1); err == nil || !strings.Contains(err.Error(), "10.0.20348") {
		t.Errorf("a build without its revision: %v", err)
	}
	if _, err := nodeRegistry("10.0.20348.1", "not-a-uuid", 1); err == nil || !strings.Contains(err.Error(), "not-a-uuid") {
		t.Errorf("a malformed UUID: %v", err)
	}
}

// TestMachineEnvironment: the node's system environment variables are values of the key every
// account's environment block is made from, quoted as regedit reads them (a Linux path's
// separators and a Windows path's backslashes both survive).
func TestMachineEnvironment(t *testing.T) {
	got := machineEnvironment([][2]string{{"HCSEMU_TCP_ADDRESS", "127.0.0.1:4000"}, {"HCSEMU_TCP_KEY_FILE", `C:\emu\hcsemu.key`}})
	want := "[HKEY_LOCAL_MACHINE\\System\\CurrentControlSet\\Control\\Session Manager\\Environment]\r\n" +
		"\"HCSEMU_TCP_ADDRESS\"=\"127.0.0.1:4000\"\r\n" +
		"\"HCSEMU_TCP_KEY_FILE\"=\"C:\\\\emu\\\\hcsemu.key\"\r\n\r\n"
	if got != want {
		t.Errorf("machineEnvironment:\n%q\nwant\n%q", got, want)
	}
}
