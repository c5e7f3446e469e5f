package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/protocols/diag"
)

// taskStateDir is the folder of containerd's task bundles under its state directory: the state
// directory of the plugin io.containerd.runtime.v2.task, in containerd 1.7 and 2.x alike
// (core/runtime/v2/task_manager.go; bundles at <that>/<namespace>/<id>, bundle.go NewBundle).
const taskStateDir = "io.containerd.runtime.v2.task"

// shimInfo is one shim found through the bundles of its tasks.
type shimInfo struct {
	Namespace string
	Address   string
	Tasks     []string // the ids of the bundles naming this shim, sorted
}

// findShims returns the shims named by the task bundles under stateDir, one per namespace and
// address (the tasks of a pod share their shim), sorted by namespace then address. namespace,
// if not empty, keeps only that namespace. A bundle without an address (its shim is being
// started, or was deleted) is skipped.
func findShims(stateDir, namespace string) ([]shimInfo, error) {
	root := filepath.Join(stateDir, taskStateDir)
	nss, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no task bundles at %s (is --state-dir containerd's state directory?): %w", root, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("read task bundles: %w", err)
	}
	type key struct{ ns, address string }
	byShim := map[key]*shimInfo{}
	for _, ns := range nss {
		if !ns.IsDir() || (namespace != "" && ns.Name() != namespace) {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, fmt.Errorf("read task bundles of namespace %s: %w", ns.Name(), err)
		}
		for _, t := range tasks {
			if !t.IsDir() {
				continue
			}
			address := bundleAddress(filepath.Join(root, ns.Name(), t.Name()))
			if address == "" {
				continue
			}
			k := key{ns.Name(), address}
			si := byShim[k]
			if si == nil {
				si = &shimInfo{Namespace: ns.Name(), Address: address}
				byShim[k] = si
			}
			si.Tasks = append(si.Tasks, t.Name())
		}
	}
	out := make([]shimInfo, 0, len(byShim))
	for _, si := range byShim {
		slices.Sort(si.Tasks)
		out = append(out, *si)
	}
	slices.SortFunc(out, func(a, b shimInfo) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Address, b.Address))
	})
	return out, nil
}

// bundleAddress is the shim address a bundle records: its `address` file (written by the runhcs
// start action, and by containerd's own shims), else the address in containerd 2.x's
// bootstrap.json (a BootstrapResult in JSON, field "address"); "" if neither.
func bundleAddress(bundle string) string {
	if b, err := os.ReadFile(filepath.Join(bundle, "address")); err == nil {
		if a := strings.TrimSpace(string(b)); a != "" {
			return a
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "bootstrap.json"))
	if err != nil {
		return ""
	}
	var boot struct {
		Address string `json:"address"`
	}
	if json.Unmarshal(b, &boot) != nil {
		return ""
	}
	return strings.TrimSpace(boot.Address)
}

// list prints the shims findShims finds, each with its pid as it reports it over the diag
// service, or why it did not.
func list(ctx context.Context, w io.Writer, stateDir, namespace string, timeout time.Duration) error {
	shims, err := findShims(stateDir, namespace)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPID\tADDRESS\tTASKS")
	for _, s := range shims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Namespace, shimPid(ctx, s.Address, timeout), s.Address, strings.Join(s.Tasks, ","))
	}
	return tw.Flush()
}

// shimPid asks the shim at address for its pid; on failure it returns a short reason.
func shimPid(ctx context.Context, address string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := connect(ctx, address)
	if err != nil {
		return "(not answering)"
	}
	defer c.Close()
	resp, err := diag.NewShimDiagClient(c).DiagPid(ctx, &diag.PidRequest{})
	switch {
	case err == nil:
		return strconv.Itoa(int(resp.GetPid()))
	case strings.Contains(err.Error(), "service containerd.runhcs.v1.diag.ShimDiag"):
		return "(no diag service)"
	default:
		return "(error: " + err.Error() + ")"
	}
}
