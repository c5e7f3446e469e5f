//go:build linux

package main

import (
	"fmt"
	"strings"
)

// ConfigOptions are the node-specific parts of the containerd configuration.
type ConfigOptions struct {
	Containerd  string // "2" (containerd 2.x, config version 3) or "1.7" (config version 2)
	Root, State string // containerd's folders (Windows paths)
	Snapshotter string // "wcow" (proxy plugins) or "windows" (built-in)
	// SnapshotterRoot is the wcow snapshotter's --root (a Windows path), which the proxy plugin
	// exports as its root: containerd's CRI reports it to kubelet as the image filesystem
	// (ImageFsInfo). Without it the CRI names <root>\io.containerd.snapshotter.v1.wcow, a folder
	// that does not exist, and kubelet's eviction manager and image garbage collection fail
	// ("failed to get HasDedicatedImageFs"; containerd 2.4.2 plugins/cri/images/plugin.go
	// snapshotRoot, 1.7.35 pkg/cri/server/service.go imageFSPath).
	SnapshotterRoot string
	CNIBin, CNIConf string // the CNI plugin and configuration folders
	Hosts           string // the registry hosts folder (certs.d)
	// Sandboxer is how CRI runs runhcs-wcow-process's pods (containerd 2.x only): "" or
	// "podsandbox", a pause container; "shim", containerd's sandbox API served by the shim
	// (docs/sandbox-api.md), and then runhcs-wcow-process-podsandbox keeps the pause container
	// for process-isolated pods that want it (and for test/cri BenchmarkPodStart, which compares
	// the two on one node). runhcs-wcow-hypervisor goes through the sandbox API too, its pod's
	// utility VM booted from the pause image (SandboxImage option), and
	// runhcs-wcow-hypervisor-podsandbox keeps the pause container for Hyper-V pods.
	Sandboxer string
}

// SandboxImage is the pause image the node's pods use: containerd 2.4.2's default (its
// internal/cri/config DefaultSandboxImage), which the node's registry holds (PauseImage).
const SandboxImage = "registry.k8s.io/pause:3.10.2"

// q quotes s as a TOML literal string: no escapes in Windows paths and pipe names.
func q(s string) string { return "'" + s + "'" }

// ContainerdConfig is the node's containerd configuration: the one docs/install-windows.md
// recommends for Windows, with the node's folders, for containerd 2.x or 1.7. runhcs is the default
// handler (runhcs-wcow-process, process isolation) and runhcs-wcow-hypervisor is the Hyper-V
// handler (SandboxIsolation = 1), the handler names of containerd's Windows defaults.
func ContainerdConfig(o ConfigOptions) string {
	var b strings.Builder
	version := 3
	if o.Containerd == "1.7" {
		version = 2
	}
	fmt.Fprintf(&b, "version = %d\nroot = %s\nstate = %s\n\n[grpc]\n  address = %s\n\n", version, q(o.Root), q(o.State), q(Pipe))
	if o.Snapshotter == "wcow" {
		// The same tables in both versions: 1.7's diff service and transfer service read them
		// as 2.x's do (1.7.35's plugins/transfer/plugin.go has unpack_config).
		fmt.Fprintf(&b, `# This project's snapshotter and differ: one pipe, two proxy plugins.
[proxy_plugins.wcow]
  type = "snapshot"
  address = %[1]s
  platform = "windows/amd64"
  exports = { root = %[2]s }
[proxy_plugins.wcow-diff]
  type = "diff"
  address = %[1]s
  platform = "windows/amd64"

[plugins.'io.containerd.service.v1.diff-service']
  default = ["wcow-diff", "windows"]

[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
  platform = "windows/amd64"
  snapshotter = "wcow"
  differ = "wcow-diff"

`, q(wcowPipe), q(o.SnapshotterRoot))
	}
	if o.Containerd == "1.7" {
		writeCRI17(&b, o)
	} else {
		writeCRI2(&b, o)
	}
	return b.String()
}

// writeCRI2 writes containerd 2.x's CRI plugins: images and runtime are two plugins.
func writeCRI2(b *strings.Builder, o ConfigOptions) {
	fmt.Fprintf(b, `[plugins.'io.containerd.cri.v1.images']
  snapshotter = %[1]s
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[2]s

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%[3]s]
  conf_dir = %[4]s

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runhcs-wcow-process"
`, q(o.Snapshotter), q(o.Hosts), q(o.CNIBin), q(o.CNIConf))
	writeRuntimes(b, "'io.containerd.cri.v1.runtime'.containerd", o.Snapshotter, o.Sandboxer)
	b.WriteString(`
# Exec, attach and port-forward: kubelet proxies the streams, so loopback, any free port.
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`)
}

// writeCRI17 writes containerd 1.7's CRI plugin, io.containerd.grpc.v1.cri, one table for
// everything (1.7.35's pkg/cri/config PluginConfig): the snapshotter and runtimes under
// containerd, the CNI folders as bin_dir (one folder; bin_dirs is 2.x's), the registry hosts
// folder, and the sandbox image, whose 1.7 default is registry.k8s.io/pause:3.8
// (config_windows.go): the node pins the same one as with 2.x.
func writeCRI17(b *strings.Builder, o ConfigOptions) {
	fmt.Fprintf(b, `[plugins.'io.containerd.grpc.v1.cri']
  sandbox_image = %[5]s
  # Exec, attach and port-forward: kubelet proxies the streams, so loopback, any free port.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins.'io.containerd.grpc.v1.cri'.registry]
    config_path = %[2]s
  [plugins.'io.containerd.grpc.v1.cri'.cni]
    bin_dir = %[3]s
    conf_dir = %[4]s

[plugins.'io.containerd.grpc.v1.cri'.containerd]
  snapshotter = %[1]s
  default_runtime_name = "runhcs-wcow-process"
`, q(o.Snapshotter), q(o.Hosts), q(o.CNIBin), q(o.CNIConf), q(SandboxImage))
	writeRuntimes(b, "'io.containerd.grpc.v1.cri'.containerd", o.Snapshotter, "")
}

// writeRuntimes writes the runtime handlers under the table base (the CRI plugin's
// containerd table), the same in both versions. With sandboxer "shim" (2.x), the process and
// Hyper-V handlers' pods go through the shim's sandbox API. The process handler's CRI pulls no
// pause image (disable_pause_image_pull, containerd 2.4's internal/cri/config Runtime); the
// Hyper-V handler's does (disable_pause_image_pull = false, said explicitly), because the pod's
// utility VM boots from its base layer: the handler's SandboxImage option names it, the CRI's
// own sandbox image (docs/sandbox-api.md). Two more handlers, runhcs-wcow-process-podsandbox
// and runhcs-wcow-hypervisor-podsandbox, run pods of each isolation with the pause container.
func writeRuntimes(b *strings.Builder, base, snapshotter, sandboxer string) {
	shim, hvShim := "", ""
	if sandboxer == "shim" {
		shim = "\n    sandboxer = \"shim\"\n    disable_pause_image_pull = true"
		hvShim = "\n    sandboxer = \"shim\"\n    disable_pause_image_pull = false"
	}
	fmt.Fprintf(b, `
  [plugins.%[1]s.runtimes.runhcs-wcow-process]
    runtime_type = "io.containerd.runhcs.v1"
    snapshotter = %[2]s%[3]s
    [plugins.%[1]s.runtimes.runhcs-wcow-process.options]
      SandboxIsolation = 0
      LogLevel = "info"
`, base, q(snapshotter), shim)
	if sandboxer == "shim" {
		fmt.Fprintf(b, `
  [plugins.%[1]s.runtimes.runhcs-wcow-process-podsandbox]
    runtime_type = "io.containerd.runhcs.v1"
    snapshotter = %[2]s
    [plugins.%[1]s.runtimes.runhcs-wcow-process-podsandbox.options]
      SandboxIsolation = 0
      LogLevel = "info"
`, base, q(snapshotter))
	}
	writeHyperV(b, base, "runhcs-wcow-hypervisor", snapshotter, hvShim)
	if sandboxer == "shim" {
		writeHyperV(b, base, "runhcs-wcow-hypervisor-podsandbox", snapshotter, "")
	}
}

// writeHyperV writes a Hyper-V handler; shim is its sandbox API lines, "" for the pause
// container. Through the sandbox API it names the pod VM's boot image (SandboxImage).
func writeHyperV(b *strings.Builder, base, name, snapshotter, shim string) {
	image := ""
	if shim != "" {
		image = "\n      SandboxImage = " + q(SandboxImage)
	}
	fmt.Fprintf(b, `
  [plugins.%[1]s.runtimes.%[2]s]
    runtime_type = "io.containerd.runhcs.v1"
    snapshotter = %[3]s%[4]s
    [plugins.%[1]s.runtimes.%[2]s.options]
      SandboxIsolation = 1%[5]s
      VmProcessorCount = 2
      VmMemorySizeInMb = 1024
      LogLevel = "info"
`, base, name, q(snapshotter), shim, image)
}
