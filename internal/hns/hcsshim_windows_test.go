package hns

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/Microsoft/hcsshim"
	hcsshimhcn "github.com/Microsoft/hcsshim/hcn"

	"github.com/openhcs/runhcs/internal/computenetwork"
)

// These tests drive hcsshim's own HNS packages, which is what containerd's Windows CRI
// (pkg/netns: hcn namespaces) and the CNI plugins (win-bridge: the root package's v1 HNS
// functions by default, hcn with ApiVersion 2) call, against the HNS the contract suite runs
// against: under Wine, hack/wine's stand-in computenetwork.dll and vmcompute.dll's HNSCall,
// forwarded to hcsemu. Each uses its own subnet in 10.251.0.0/16, apart from the contract
// suite's.

const unknownID = "0b0e5f3c-1111-4222-8333-944455556666"

func hcnErrorIs(err error, hr computenetwork.HRESULT) bool {
	return hcsshimhcn.CheckErrorWithCode(err, hcsshimhcn.ErrorCode(hr))
}

func TestHcsshimHCN(t *testing.T) {
	c := requireContract(t)
	// hcn's version probe: GET /globals/version through HNSCall.
	if err := hcsshimhcn.V2ApiSupported(); err != nil {
		t.Fatalf("V2ApiSupported: %v", err)
	}
	want := &hcsshimhcn.HostComputeNetwork{
		Name: "hcsshim-hcn", Type: hcsshimhcn.NAT,
		Ipams: []hcsshimhcn.Ipam{{Type: "Static", Subnets: []hcsshimhcn.Subnet{{
			IpAddressPrefix: "10.251.20.0/24",
			Routes:          []hcsshimhcn.Route{{NextHop: "10.251.20.1", DestinationPrefix: "0.0.0.0/0"}},
		}}}},
		SchemaVersion: hcsshimhcn.V2SchemaVersion(),
	}
	n, err := want.Create()
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	t.Cleanup(func() { n.Delete() })
	if n.Id == "" || n.Name != "hcsshim-hcn" || n.Type != hcsshimhcn.NAT {
		t.Fatalf("created %+v", n)
	}
	if got, err := hcsshimhcn.GetNetworkByName("hcsshim-hcn"); err != nil || got.Id != n.Id {
		t.Fatalf("GetNetworkByName: %+v, %v", got, err)
	}
	if _, err := want.Create(); !hcnErrorIs(err, computenetwork.HCN_E_NETWORK_ALREADY_EXISTS) {
		t.Errorf("a second network of the same name: %v, want HCN_E_NETWORK_ALREADY_EXISTS", err)
	}

	ep, err := n.CreateEndpoint(&hcsshimhcn.HostComputeEndpoint{
		Name:             "hcsshim-hcn-ep",
		IpConfigurations: []hcsshimhcn.IpConfig{{IpAddress: "10.251.20.10", PrefixLength: 24}},
		SchemaVersion:    hcsshimhcn.V2SchemaVersion(),
	})
	if err != nil {
		t.Fatalf("create endpoint: %v", err)
	}
	t.Cleanup(func() { ep.Delete() })
	if ep.HostComputeNetwork != n.Id || len(ep.IpConfigurations) != 1 || ep.IpConfigurations[0].IpAddress != "10.251.20.10" || ep.MacAddress == "" {
		t.Errorf("created endpoint %+v", ep)
	}
	if eps, err := hcsshimhcn.ListEndpointsOfNetwork(n.Id); err != nil || len(eps) != 1 || eps[0].Id != ep.Id {
		t.Errorf("ListEndpointsOfNetwork: %+v, %v", eps, err)
	}
	_, err = n.CreateEndpoint(&hcsshimhcn.HostComputeEndpoint{
		IpConfigurations: []hcsshimhcn.IpConfig{{IpAddress: "10.251.99.10", PrefixLength: 24}},
		SchemaVersion:    hcsshimhcn.V2SchemaVersion(),
	})
	if !hcnErrorIs(err, computenetwork.HCN_E_INVALID_IP) {
		t.Errorf("an endpoint outside the subnet: %v, want HCN_E_INVALID_IP", err)
	}

	// What containerd's pkg/netns does for a pod: a host namespace, then the CNI plugin adds
	// the endpoint to it.
	ns, err := hcsshimhcn.NewNamespace(hcsshimhcn.NamespaceTypeHost).Create()
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { ns.Delete() })
	if err := hcsshimhcn.AddNamespaceEndpoint(ns.Id, ep.Id); err != nil {
		t.Fatalf("AddNamespaceEndpoint: %v", err)
	}
	if ids, err := hcsshimhcn.GetNamespaceEndpointIds(ns.Id); err != nil || !slices.Equal(ids, []string{ep.Id}) {
		t.Errorf("GetNamespaceEndpointIds: %v, %v; want [%s]", ids, err, ep.Id)
	}
	// The same state through this project's client.
	if mine, err := c.GetEndpoint(ctx(t), ep.Id); err != nil || mine.HostComputeNamespace != ns.Id {
		t.Errorf("the endpoint through internal/hns: namespace %q, %v; want %s", mine.HostComputeNamespace, err, ns.Id)
	}
	other, err := hcsshimhcn.NewNamespace(hcsshimhcn.NamespaceTypeHost).Create()
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { other.Delete() })
	if err := hcsshimhcn.AddNamespaceEndpoint(other.Id, ep.Id); !hcnErrorIs(err, computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED) {
		t.Errorf("an endpoint already in another namespace: %v, want HCN_E_ENDPOINT_ALREADY_ATTACHED", err)
	}
	if err := hcsshimhcn.RemoveNamespaceEndpoint(ns.Id, ep.Id); err != nil {
		t.Fatalf("RemoveNamespaceEndpoint: %v", err)
	}
	if ids, err := hcsshimhcn.GetNamespaceEndpointIds(ns.Id); err != nil || len(ids) != 0 {
		t.Errorf("after RemoveNamespaceEndpoint: %v, %v", ids, err)
	}

	for name, err := range map[string]error{
		"network":   func() error { _, err := hcsshimhcn.GetNetworkByID(unknownID); return err }(),
		"endpoint":  func() error { _, err := hcsshimhcn.GetEndpointByID(unknownID); return err }(),
		"namespace": func() error { _, err := hcsshimhcn.GetNamespaceByID(unknownID); return err }(),
	} {
		if !hcsshimhcn.IsNotFoundError(err) {
			t.Errorf("an unknown %s: %v, want hcn.IsNotFoundError", name, err)
		}
	}

	if err := ep.Delete(); err != nil {
		t.Fatalf("delete endpoint: %v", err)
	}
	if err := ns.Delete(); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	if err := n.Delete(); err != nil {
		t.Fatalf("delete network: %v", err)
	}
	if _, err := hcsshimhcn.GetNetworkByName("hcsshim-hcn"); !hcsshimhcn.IsNotFoundError(err) {
		t.Errorf("after delete, GetNetworkByName: %v", err)
	}
}

// TestHcsshimV1 drives the root package's HNS functions (hcsshim's internal/hns), HNSCall's
// v1 documents: what win-bridge uses in its default mode.
func TestHcsshimV1(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("hcsshim-v1", "10.251.21.0/24", "10.251.21.1"))

	all, err := hcsshim.HNSListNetworkRequest("GET", "", "")
	if err != nil {
		t.Fatalf("HNSListNetworkRequest: %v", err)
	}
	if !slices.ContainsFunc(all, func(v hcsshim.HNSNetwork) bool { return v.Id == n.Id }) {
		t.Errorf("HNSListNetworkRequest: %d networks, none is %s", len(all), n.Id)
	}
	v1, err := hcsshim.GetHNSNetworkByName("hcsshim-v1")
	if err != nil {
		t.Fatalf("GetHNSNetworkByName: %v", err)
	}
	if v1.Id != n.Id || v1.Type != "NAT" || len(v1.Subnets) != 1 || v1.Subnets[0].AddressPrefix != "10.251.21.0/24" || v1.Subnets[0].GatewayAddress != "10.251.21.1" {
		t.Errorf("v1 network %+v", v1)
	}
	if byID, err := hcsshim.GetHNSNetworkByID(n.Id); err != nil || byID.Name != "hcsshim-v1" {
		t.Errorf("GetHNSNetworkByID: %+v, %v", byID, err)
	}

	nat, err := json.Marshal(map[string]any{"Type": "NAT", "Protocol": "TCP", "InternalPort": 80, "ExternalPort": 18095})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := (&hcsshim.HNSEndpoint{
		Name: "hcsshim-v1-ep", VirtualNetwork: n.Id, IPAddress: net.ParseIP("10.251.21.20"), PrefixLength: 24,
		Policies: []json.RawMessage{nat},
	}).Create()
	if err != nil {
		t.Fatalf("create v1 endpoint: %v", err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(ctx(t), ep.Id) })
	if ep.Id == "" || !ep.IPAddress.Equal(net.ParseIP("10.251.21.20")) || ep.VirtualNetwork != n.Id || ep.MacAddress == "" {
		t.Errorf("created v1 endpoint %+v", ep)
	}
	if got, err := hcsshim.GetHNSEndpointByName("hcsshim-v1-ep"); err != nil || got.Id != ep.Id {
		t.Errorf("GetHNSEndpointByName: %+v, %v", got, err)
	}
	eps, err := hcsshim.HNSListEndpointRequest()
	if err != nil || !slices.ContainsFunc(eps, func(e hcsshim.HNSEndpoint) bool { return e.Id == ep.Id }) {
		t.Errorf("HNSListEndpointRequest: %d endpoints, %v; want %s among them", len(eps), err, ep.Id)
	}
	// The v1 endpoint and its NAT policy, seen through v2.
	v2, err := c.GetEndpoint(ctx(t), ep.Id)
	if err != nil || len(v2.Policies) != 1 || v2.Policies[0].Type != "PortMapping" {
		t.Errorf("the v1 endpoint through v2: %+v, %v", v2, err)
	}
	// HNS refuses in the response document (Success false), which hcsshim turns into an error.
	if _, err := (&hcsshim.HNSEndpoint{VirtualNetwork: n.Id, IPAddress: net.ParseIP("10.251.22.20")}).Create(); err == nil {
		t.Error("a v1 endpoint outside the subnet was created")
	}
	if _, err := hcsshim.GetHNSEndpointByID(unknownID); err == nil {
		t.Error("GetHNSEndpointByID of an unknown id succeeded")
	}

	if _, err := ep.Delete(); err != nil {
		t.Fatalf("delete v1 endpoint: %v", err)
	}
	if _, err := hcsshim.GetHNSEndpointByID(ep.Id); err == nil {
		t.Error("the v1 endpoint is still there after Delete")
	}
}

// TestHcsshimLoadBalancers makes the calls kube-proxy's winkernel proxier makes through hnslib,
// whose hcn package is hcsshim's (docs/notes/kube-proxy-hns.md has the list).
func TestHcsshimLoadBalancers(t *testing.T) {
	c := requireContract(t)
	// Start-up: the v1 compatibility check and the features read from /globals/version.
	if _, err := hcsshim.HNSListPolicyListRequest(); err != nil {
		t.Fatalf("HNSListPolicyListRequest (kube-proxy's IsCompatible): %v", err)
	}
	// kube-proxy calls hnslib's GetSupportedFeatures, which is this (hcsshim deprecates the
	// uncached name).
	f, err := hcsshimhcn.GetCachedSupportedFeatures()
	if err != nil {
		t.Fatalf("supported features: %v", err)
	}
	if !f.Api.V2 || !f.DSR || !f.SessionAffinity || f.ModifyLoadbalancer {
		t.Errorf("features %+v: want V2, DSR and SessionAffinity, not ModifyLoadbalancer (HNS 13.2)", f)
	}
	n := network(t, c, l2bridgeNetwork("hcsshim-lb", "10.251.23.0/24", "10.251.23.1"))
	hn, err := hcsshimhcn.GetNetworkByName("hcsshim-lb")
	if err != nil || hn.Id != n.Id || !strings.EqualFold(string(hn.Type), "L2Bridge") {
		t.Fatalf("GetNetworkByName: %+v, %v", hn, err)
	}
	local := endpointAt(t, c, n.Id, "10.251.23.11", 0)
	// A backend on another node, as kube-proxy's createEndpoint makes it on L2Bridge.
	remote, err := hn.CreateRemoteEndpoint(&hcsshimhcn.HostComputeEndpoint{
		IpConfigurations: []hcsshimhcn.IpConfig{{IpAddress: "10.251.24.11"}},
		SchemaVersion:    hcsshimhcn.SchemaVersion{Major: 2, Minor: 0},
	})
	if err != nil {
		t.Fatalf("CreateRemoteEndpoint: %v", err)
	}
	t.Cleanup(func() { remote.Delete() })
	eps, err := hcsshimhcn.ListEndpointsOfNetwork(n.Id)
	if err != nil || len(eps) != 2 {
		t.Fatalf("ListEndpointsOfNetwork: %+v, %v", eps, err)
	}
	for _, ep := range eps {
		if isRemote := ep.Flags&hcsshimhcn.EndpointFlagsRemoteEndpoint != 0; isRemote != (ep.Id == remote.Id) {
			t.Errorf("endpoint %s (%s): remote %v", ep.Id, ep.IpConfigurations[0].IpAddress, isRemote)
		}
	}

	// A ClusterIP with session affinity, as getLoadBalancer builds it.
	proposed := &hcsshimhcn.HostComputeLoadBalancer{
		HostComputeEndpoints: []string{local.Id, remote.Id},
		FrontendVIPs:         []string{"10.251.123.10"},
		PortMappings: []hcsshimhcn.LoadBalancerPortMapping{{Protocol: 6, InternalPort: 8080, ExternalPort: 80,
			DistributionType: hcsshimhcn.LoadBalancerDistributionSourceIP}},
		SchemaVersion: hcsshimhcn.SchemaVersion{Major: 2, Minor: 0},
	}
	lb, err := proposed.Create()
	if err != nil {
		t.Fatalf("create load balancer: %v", err)
	}
	t.Cleanup(func() { lb.Delete() })
	if lb.Id == "" || len(lb.HostComputeEndpoints) != 2 || lb.PortMappings[0].DistributionType != hcsshimhcn.LoadBalancerDistributionSourceIP {
		t.Errorf("created %+v", lb)
	}
	// The same frontend: kube-proxy's IsPolicyAlreadyExists, then it replaces the old one.
	if _, err := proposed.Create(); !hcsshimhcn.IsPortAlreadyExistsError(err) {
		t.Errorf("a second load balancer on the same frontend: %v, want IsPortAlreadyExistsError", err)
	}
	// A NodePort: no VIP, LocalRoutedVIP | VipExternalIP (16, kube-proxy's own constant).
	np, err := (&hcsshimhcn.HostComputeLoadBalancer{
		HostComputeEndpoints: []string{local.Id},
		PortMappings: []hcsshimhcn.LoadBalancerPortMapping{{Protocol: 17, InternalPort: 53, ExternalPort: 30053,
			Flags: hcsshimhcn.LoadBalancerPortMappingFlagsLocalRoutedVIP | 16}},
		SchemaVersion: hcsshimhcn.SchemaVersion{Major: 2, Minor: 0},
		Flags:         hcsshimhcn.LoadBalancerFlagsDSR,
	}).Create()
	if err != nil {
		t.Fatalf("create NodePort load balancer: %v", err)
	}
	t.Cleanup(func() { np.Delete() })
	all, err := hcsshimhcn.ListLoadBalancers()
	if err != nil || !slices.ContainsFunc(all, func(l hcsshimhcn.HostComputeLoadBalancer) bool { return l.Id == lb.Id }) ||
		!slices.ContainsFunc(all, func(l hcsshimhcn.HostComputeLoadBalancer) bool { return l.Id == np.Id }) {
		t.Errorf("ListLoadBalancers: %+v, %v", all, err)
	}
	if got, err := hcsshimhcn.GetLoadBalancerByID(lb.Id); err != nil || got.FrontendVIPs[0] != "10.251.123.10" {
		t.Errorf("GetLoadBalancerByID: %+v, %v", got, err)
	}
	if err := lb.Delete(); err != nil {
		t.Fatalf("delete load balancer: %v", err)
	}
	// kube-proxy's deleteLoadBalancer treats this as already deleted.
	if _, err := hcsshimhcn.GetLoadBalancerByID(lb.Id); !hcsshimhcn.IsNotFoundError(err) {
		t.Errorf("GetLoadBalancerByID after delete: %v, want hcn.IsNotFoundError", err)
	}
	if err := np.Delete(); err != nil {
		t.Fatalf("delete NodePort load balancer: %v", err)
	}
	if err := remote.Delete(); err != nil {
		t.Fatalf("delete remote endpoint: %v", err)
	}
}
