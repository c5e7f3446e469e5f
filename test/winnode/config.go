//go:build linux

package main

import (
	"fmt"
	"strings"
)

// ConfigOptions are the node-specific parts of the containerd configuration.
type ConfigOptions struct {
	Root, State     string // containerd's folders (Windows paths)
	Snapshotter     string // "wcow" (proxy plugins) or "windows" (built-in)
	CNIBin, CNIConf string // the CNI plugin and configuration folders
	Hosts           string // the registry hosts folder (certs.d)
}

// ContainerdConfig is the containerd 2.x configuration of the node: the one the README
// recommends for Windows, with the node's folders. runhcs is the default handler
// (runhcs-wcow-process, process isolation) and runhcs-wcow-hypervisor is the Hyper-V handler
// (SandboxIsolation = 1), the handler names of containerd's Windows defaults.
func ContainerdConfig(o ConfigOptions) string {
	var b strings.Builder
	q := func(s string) string { return "'" + s + "'" } // TOML literal strings: no escapes in Windows paths
	fmt.Fprintf(&b, "version = 3\nroot = %s\nstate = %s\n\n[grpc]\n  address = %s\n\n", q(o.Root), q(o.State), q(Pipe))
	snap := o.Snapshotter
	if snap == "wcow" {
		fmt.Fprintf(&b, `# This project's snapshotter and differ: one pipe, two proxy plugins.
[proxy_plugins.wcow]
  type = "snapshot"
  address = %[1]s
  platform = "windows/amd64"
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

`, q(wcowPipe))
	}
	fmt.Fprintf(&b, `[plugins.'io.containerd.cri.v1.images']
  snapshotter = %[1]s
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[2]s

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%[3]s]
  conf_dir = %[4]s

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runhcs-wcow-process"

  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runhcs-wcow-process]
    runtime_type = "io.containerd.runhcs.v1"
    snapshotter = %[1]s
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runhcs-wcow-process.options]
      SandboxIsolation = 0
      LogLevel = "info"

  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runhcs-wcow-hypervisor]
    runtime_type = "io.containerd.runhcs.v1"
    snapshotter = %[1]s
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runhcs-wcow-hypervisor.options]
      SandboxIsolation = 1
      VmProcessorCount = 2
      VmMemorySizeInMb = 1024
      LogLevel = "info"

# Exec, attach and port-forward: kubelet proxies the streams, so loopback, any free port.
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, q(snap), q(o.Hosts), q(o.CNIBin), q(o.CNIConf))
	return b.String()
}
