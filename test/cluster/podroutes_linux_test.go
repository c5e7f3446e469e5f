//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestCheckPodSubnet checks what join refuses of a node's pod subnet: outside the cluster's pod
// CIDR, overlapping a node joined before, or a name or number taken.
func TestCheckPodSubnet(t *testing.T) {
	one := joinedNode{Name: "winnode-1", Index: 1, Address: "10.251.0.11", PodSubnet: "10.250.0.0/24"}
	two := joinedNode{Name: "winnode-2", Index: 2, Address: "10.251.0.12", PodSubnet: "10.250.1.0/24"}
	if err := checkPodSubnet(one, nil); err != nil {
		t.Errorf("the first node: %v", err)
	}
	if err := checkPodSubnet(two, []joinedNode{one}); err != nil {
		t.Errorf("the second node: %v", err)
	}
	for _, tc := range []struct {
		subnet, name string
		index        int
		want         string
	}{
		{"", "winnode-2", 2, `pod subnet "" (RUNHCS_NODE_POD_SUBNET of its node.env)`},
		{"10.251.0.0/24", "winnode-2", 2, "not inside the cluster's pod CIDR 10.250.0.0/16"},
		{"10.250.0.0/15", "winnode-2", 2, "not inside the cluster's pod CIDR"},
		{"10.250.0.128/25", "winnode-2", 2, "overlaps node winnode-1's 10.250.0.0/24"},
		{"10.250.1.0/24", "winnode-1", 2, "node winnode-1 (index 1) joined already"},
		{"10.250.1.0/24", "winnode-3", 1, "node winnode-1 (index 1) joined already"},
	} {
		n := joinedNode{Name: tc.name, Index: tc.index, PodSubnet: tc.subnet}
		err := checkPodSubnet(n, []joinedNode{one})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", n, err, tc.want)
		}
	}
}
