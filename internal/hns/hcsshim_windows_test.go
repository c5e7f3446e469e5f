package hns

import (
	"encoding/json"
	"net"
	"slices"
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
	// Load balancers are not emulated; hcn says so the way callers test for it.
	if _, err := hcsshimhcn.ListLoadBalancers(); !hcsshimhcn.IsNotImplemented(err) {
		t.Errorf("ListLoadBalancers: %v, want hcn.IsNotImplemented", err)
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
