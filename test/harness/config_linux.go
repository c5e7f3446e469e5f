package harness

import (
	"fmt"
	"strings"
)

// Names the generated config gives the proxy plugins and the runtime. They are what tests pass to
// ctr (--snapshotter) and what CRI configs name.
const (
	Snapshotter = "wcow"
	Differ      = "wcow-diff"
	Runtime     = "io.containerd.runhcs.v1"
	Namespace   = "default"
	Platform    = "windows/amd64"
)

// configParams are the inputs of the containerd config.
type configParams struct {
	Version         string // "2" or "1.7"
	Root, State     string
	Temp            string
	Address         string // gRPC socket
	TTRPCAddress    string
	DebugAddress    string
	SnapshotterAddr string // socket serving both the snapshotter and the differ
	OptDir          string
	EnableCRI       bool
	Extra           string // TOML appended as is
}

// containerdConfig renders the config: version 3 for containerd 2.x, version 2 for 1.7 (each
// refuses the other's plugin layout). containerd 2.4 is at config version 4 and logs that it
// migrated a version 3 file; its 3→4 migrations only move 1.x-era CRI and runtime keys, none of
// which this config has, and version 3 keeps the file valid for 2.0–2.3 too. It sets every path under the temporary root so several
// containerds can run side by side and nothing touches /var/lib/containerd or /run/containerd.
func containerdConfig(p configParams) (string, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	q := func(s string) string { return fmt.Sprintf("%q", s) }

	disabled := []string{
		// NRI listens on a fixed socket (/var/run/nri/nri.sock) that side-by-side containerds would fight over.
		q("io.containerd.nri.v1.nri"),
	}
	if !p.EnableCRI {
		disabled = append(disabled, q("io.containerd.grpc.v1.cri"))
	}

	switch p.Version {
	case "2":
		w("version = 3")
	case "1.7":
		w("version = 2")
	default:
		return "", fmt.Errorf("containerd version %q: want 2 or 1.7", p.Version)
	}
	w("root = %s", q(p.Root))
	w("state = %s", q(p.State))
	if p.Version == "2" {
		w("temp = %s", q(p.Temp))
	}
	w("disabled_plugins = [%s]", strings.Join(disabled, ", "))
	w("")
	w("[grpc]")
	w("  address = %s", q(p.Address))
	w("[ttrpc]")
	w("  address = %s", q(p.TTRPCAddress))
	w("[debug]")
	w("  address = %s", q(p.DebugAddress))
	w("  level = \"debug\"")
	w("  format = \"text\"")
	w("[metrics]")
	w("  address = \"\"")
	w("")
	// The snapshotter and its differ: one socket, two proxy plugins, for the Windows platform so
	// that unpacking a windows/amd64 image picks them.
	w("[proxy_plugins]")
	w("  [proxy_plugins.%s]", q(Snapshotter))
	w("    type = \"snapshot\"")
	w("    address = %s", q(p.SnapshotterAddr))
	w("    platform = %s", q(Platform))
	w("  [proxy_plugins.%s]", q(Differ))
	w("    type = \"diff\"")
	w("    address = %s", q(p.SnapshotterAddr))
	w("    platform = %s", q(Platform))
	w("")
	w("[plugins]")
	// Client-side unpacks (ctr run, ctr image import in 1.7, the Go client's Unpack) go through
	// the diff service, which tries its differs in order and moves on when one answers "not
	// implemented" (a mount it does not handle); the transfer service uses unpack_config instead.
	w("  [plugins.\"io.containerd.service.v1.diff-service\"]")
	w("    default = [%s, \"walking\"]", q(Differ))
	w("  [plugins.\"io.containerd.internal.v1.opt\"]")
	w("    path = %s", q(p.OptDir))
	w("  [plugins.\"io.containerd.runtime.v2.task\"]")
	w("    platforms = [\"linux/amd64\", %s]", q(Platform))
	// The transfer service (2.x's ctr image import and pull, CRI pulls) reads unpack_config in
	// both versions (1.7.35: plugins/transfer/plugin.go) and does not fall back across differs:
	// one entry per platform. Defining it replaces containerd's default, so the Linux entry stays.
	w("  [plugins.\"io.containerd.transfer.v1.local\"]")
	w("    [[plugins.\"io.containerd.transfer.v1.local\".unpack_config]]")
	w("      platform = \"linux/amd64\"")
	w("      snapshotter = \"overlayfs\"")
	w("      differ = \"walking\"")
	w("    [[plugins.\"io.containerd.transfer.v1.local\".unpack_config]]")
	w("      platform = %s", q(Platform))
	w("      snapshotter = %s", q(Snapshotter))
	w("      differ = %s", q(Differ))
	if p.Version == "1.7" {
		// No Prometheus cgroup metrics: the harness does not put containerd in a cgroup.
		w("  [plugins.\"io.containerd.monitor.v1.cgroups\"]")
		w("    no_prometheus = true")
	}
	if p.Extra != "" {
		w("")
		w("%s", p.Extra)
	}
	return b.String(), nil
}
