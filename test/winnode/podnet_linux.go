//go:build linux

package main

import (
	"fmt"
	"net/netip"
)

// The node's pod network by default: one node's subnet of the cluster's pod CIDR (test/cluster
// gives node K 10.250.(K-1).0/24).
const (
	defaultPodSubnet   = "10.250.0.0/24"
	defaultClusterCIDR = "10.250.0.0/16"
)

// podNetwork is the node's pod network: the subnet of its HNS L2Bridge network (what
// --pod-subnet names, the Node's podCIDR in a cluster), the gateway win-bridge gives its
// endpoints, host-local's range of pod addresses, and the cluster's pod CIDR, which the CNI
// configuration exempts from outbound NAT (win-bridge's ipMasqNetwork) so that pods of other
// nodes see a pod's own address.
type podNetwork struct {
	Subnet               netip.Prefix
	Gateway              netip.Addr
	RangeStart, RangeEnd netip.Addr
	ClusterCIDR          netip.Prefix
}

// newPodNetwork checks the node's --pod-subnet and --cluster-cidr and derives the rest.
//
// The gateway is the subnet's .2: win-bridge computes every endpoint's gateway as the subnet's
// address plus 2 (containernetworking/plugins v1.9.1 plugins/main/windows/win-bridge,
// processEndpointArgs: "Calculate gateway for bridge network (needs to be x.2)"), so the HNS
// network's default route and the bridge's address must be that one. Pods get the addresses
// from .10 to the fifth before the broadcast address (in a /24 .10 to .250, as before the flag).
// IPv4 only: an L2Bridge network has no IPv6 on Windows (issue 23's seed pages).
func newPodNetwork(subnet, clusterCIDR string) (podNetwork, error) {
	var pn podNetwork
	s, err := netip.ParsePrefix(subnet)
	if err != nil {
		return pn, fmt.Errorf("--pod-subnet %q: %v", subnet, err)
	}
	if !s.Addr().Is4() {
		return pn, fmt.Errorf("--pod-subnet %q: an IPv4 subnet is required (an L2Bridge network has no IPv6)", subnet)
	}
	if s != s.Masked() {
		return pn, fmt.Errorf("--pod-subnet %q: not a subnet's address (want %s)", subnet, s.Masked())
	}
	if s.Bits() < 16 || s.Bits() > 27 {
		return pn, fmt.Errorf("--pod-subnet %q: want a prefix length from /16 to /27", subnet)
	}
	c, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return pn, fmt.Errorf("--cluster-cidr %q: %v", clusterCIDR, err)
	}
	if c != c.Masked() || !c.Addr().Is4() {
		return pn, fmt.Errorf("--cluster-cidr %q: want an IPv4 subnet's address (%s)", clusterCIDR, c.Masked())
	}
	if c.Bits() > s.Bits() || !c.Contains(s.Addr()) {
		return pn, fmt.Errorf("--pod-subnet %s is not inside --cluster-cidr %s", s, c)
	}
	base := s.Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	size := uint32(1) << (32 - s.Bits())
	at := func(off uint32) netip.Addr {
		v := n + off
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return podNetwork{Subnet: s, Gateway: at(2), RangeStart: at(10), RangeEnd: at(size - 6), ClusterCIDR: c}, nil
}
