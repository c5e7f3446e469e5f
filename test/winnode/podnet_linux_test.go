//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestPodNetwork checks the addresses derived from --pod-subnet and the errors for bad ones.
func TestPodNetwork(t *testing.T) {
	for _, tc := range []struct {
		subnet, cluster      string
		gateway, first, last string
	}{
		{"10.250.0.0/24", "10.250.0.0/16", "10.250.0.2", "10.250.0.10", "10.250.0.250"},
		{"10.250.1.0/24", "10.250.0.0/16", "10.250.1.2", "10.250.1.10", "10.250.1.250"},
		{"10.96.64.0/20", "10.96.0.0/12", "10.96.64.2", "10.96.64.10", "10.96.79.250"},
		{"192.168.7.32/27", "192.168.0.0/16", "192.168.7.34", "192.168.7.42", "192.168.7.58"},
	} {
		pn, err := newPodNetwork(tc.subnet, tc.cluster)
		if err != nil {
			t.Errorf("%s in %s: %v", tc.subnet, tc.cluster, err)
			continue
		}
		if pn.Gateway.String() != tc.gateway || pn.RangeStart.String() != tc.first || pn.RangeEnd.String() != tc.last {
			t.Errorf("%s: gateway %s, range %s-%s; want %s, %s-%s", tc.subnet, pn.Gateway, pn.RangeStart, pn.RangeEnd, tc.gateway, tc.first, tc.last)
		}
	}
	for _, tc := range []struct{ subnet, cluster, want string }{
		{"10.250.1.0", "10.250.0.0/16", `--pod-subnet "10.250.1.0"`},
		{"10.250.1.1/24", "10.250.0.0/16", "not a subnet's address (want 10.250.1.0/24)"},
		{"fd00::/64", "fd00::/48", "IPv4"},
		{"10.250.1.0/28", "10.250.0.0/16", "/16 to /27"},
		{"10.251.0.0/24", "10.250.0.0/16", "not inside --cluster-cidr 10.250.0.0/16"},
		{"10.250.0.0/16", "10.250.0.0/24", "not inside --cluster-cidr"},
		{"10.250.0.0/24", "10.250.0.0/33", `--cluster-cidr "10.250.0.0/33"`},
	} {
		_, err := newPodNetwork(tc.subnet, tc.cluster)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s in %s: error %v, want one saying %q", tc.subnet, tc.cluster, err, tc.want)
		}
	}
}
