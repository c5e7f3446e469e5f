//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"github.com/vishvananda/netlink"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// joinedNode is what join records of a node in DIR/joined/NAME.json: what routing between the
// nodes' pod subnets needs when the next node joins.
type joinedNode struct {
	Name      string `json:"name"`
	Index     int    `json:"index"`
	Address   string `json:"address"`   // on the physical network, 10.251.0.(10+index)
	PodSubnet string `json:"podSubnet"` // the node's HNS network, its Node's podCIDR
	HostNetns string `json:"hostNetns"` // the node's host network namespace file
}

func joinedDir(root string) string { return filepath.Join(root, "joined") }

// readJoined lists the nodes joined so far, by index.
func readJoined(root string) ([]joinedNode, error) {
	files, err := filepath.Glob(filepath.Join(joinedDir(root), "*.json"))
	if err != nil {
		return nil, err
	}
	var nodes []joinedNode
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var n joinedNode
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Index < nodes[j].Index })
	return nodes, nil
}

// checkPodSubnet checks a joining node's pod subnet (the node's own, RUNHCS_NODE_POD_SUBNET of
// its node.env) against the cluster's pod CIDR and the nodes joined before: inside the one,
// overlapping none of the others, and its name and number not taken.
func checkPodSubnet(self joinedNode, others []joinedNode) error {
	s, err := netip.ParsePrefix(self.PodSubnet)
	if err != nil {
		return fmt.Errorf("node %s: pod subnet %q (RUNHCS_NODE_POD_SUBNET of its node.env): %v", self.Name, self.PodSubnet, err)
	}
	cluster := netip.MustParsePrefix(podCIDR)
	if s.Bits() < cluster.Bits() || !cluster.Contains(s.Addr()) {
		return fmt.Errorf("node %s: pod subnet %s is not inside the cluster's pod CIDR %s (hack/winnode.sh up --pod-subnet)", self.Name, s, cluster)
	}
	for _, o := range others {
		if o.Name == self.Name || o.Index == self.Index {
			return fmt.Errorf("node %s (--index %d): node %s (index %d) joined already", self.Name, self.Index, o.Name, o.Index)
		}
		op, err := netip.ParsePrefix(o.PodSubnet)
		if err == nil && op.Overlaps(s) {
			return fmt.Errorf("node %s: pod subnet %s overlaps node %s's %s", self.Name, s, o.Name, op)
		}
	}
	return nil
}

// routePodSubnets gives the joining node and each node joined before a route to the other's pod
// subnet through the other's address on the physical network, in their host namespaces, as a
// win-bridge cluster's hosts get them (flannel host-gw or static routes: a Windows host routes
// between its vSwitch and its NIC, and the L2Bridge network's endpoints default to its
// gateway). The control plane's route to the joining node's subnet is link's.
func routePodSubnets(self joinedNode, others []joinedNode) error {
	add := func(nsFile, dst, via string) error {
		_, d, err := net.ParseCIDR(dst)
		if err != nil {
			return err
		}
		return withHandle(nsFile, func(h *netlink.Handle) error {
			if err := h.RouteReplace(&netlink.Route{Dst: d, Gw: net.ParseIP(via)}); err != nil {
				return fmt.Errorf("route %s via %s: %w", dst, via, err)
			}
			return nil
		})
	}
	for _, o := range others {
		if err := add(self.HostNetns, o.PodSubnet, o.Address); err != nil {
			return fmt.Errorf("node %s's host: %w", self.Name, err)
		}
		if err := add(o.HostNetns, self.PodSubnet, self.Address); err != nil {
			return fmt.Errorf("node %s's host (is it up?): %w", o.Name, err)
		}
	}
	return nil
}

// recordJoined writes DIR/joined/NAME.json.
func recordJoined(root string, n joinedNode) error {
	if err := os.MkdirAll(joinedDir(root), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(joinedDir(root), n.Name+".json"), n, 0o644)
}

// setPodCIDR sets the Node's spec.podCIDR and podCIDRs to its node's pod subnet, as the
// controller manager's node IPAM does in clusters that allocate them (--allocate-node-cidrs,
// which this cluster does not use: each node's subnet is its HNS network's, chosen at up).
// kubelet passes it on to the runtime (CRI UpdateRuntimeConfig; k8s.io/kubernetes v1.37.2
// pkg/kubelet/kubelet_node_status.go updateNode); its --pod-cidr counts only in standalone mode
// (cmd/kubelet/app/options). The API server accepts the change from empty only.
func setPodCIDR(c *http.Client, name, subnet string) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": subnet, "podCIDRs": []string{subnet}}})
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://%s:%d/api/v1/nodes/%s", apiAddr, apiPort, name)
	req, err := http.NewRequest(http.MethodPatch, url, bytes.NewReader(patch))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("PATCH node %s podCIDR %s: %s: %s", name, subnet, resp.Status, b)
	}
	return nil
}
