package hns

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The contract suite: what HNS does, through the API of the platform (the hcsemu daemon on
// Linux, computenetwork.dll on Windows; contract_env_*_test.go). Written against the documented
// behaviour and hcsshim's use of it, so it can run against the real service. Each test uses
// its own subnet in 10.251.0.0/16, so tests do not depend on each other.

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func natNetwork(name, subnet, gw string) *hcn.HostComputeNetwork {
	return &hcn.HostComputeNetwork{
		Name: name, Type: hcn.NAT,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: subnet,
			Routes:          []hcn.Route{{NextHop: gw, DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	}
}

// network makes a network for one test and removes it after.
func network(t *testing.T, c *Client, n *hcn.HostComputeNetwork) *hcn.HostComputeNetwork {
	t.Helper()
	out, err := c.CreateNetwork(ctx(t), n)
	if err != nil {
		t.Fatalf("create network %s: %v", n.Name, err)
	}
	t.Cleanup(func() { c.DeleteNetwork(context.Background(), out.Id) })
	return out
}

func wantHR(t *testing.T, err error, hr computenetwork.HRESULT, field string) {
	t.Helper()
	if !errors.Is(err, hr) {
		t.Fatalf("error %v; want %v", err, hr)
	}
	if field != "" && !strings.Contains(err.Error(), field) {
		t.Fatalf("error %q does not name %q", err, field)
	}
}

func TestContractVersion(t *testing.T) {
	c := requireContract(t)
	v, err := c.Version(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// hcsshim's hcn uses the v2 API from 9.2 on.
	if v.Major < 9 || v.Major == 9 && v.Minor < 2 {
		t.Errorf("version %d.%d is older than 9.2", v.Major, v.Minor)
	}
}

func TestContractNetwork(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("contract-net", "10.251.1.0/24", "10.251.1.1"))
	if n.Id == "" || n.Type != hcn.NAT || n.Name != "contract-net" {
		t.Fatalf("created %+v", n)
	}
	got, err := c.GetNetwork(ctx(t), n.Id)
	if err != nil || got.Id != n.Id || got.Ipams[0].Subnets[0].IpAddressPrefix != "10.251.1.0/24" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	byName, err := c.ListNetworks(ctx(t), Filter{"Name": "contract-net"})
	if err != nil || len(byName) != 1 || byName[0].Id != n.Id {
		t.Fatalf("list by name: %+v, %v", byName, err)
	}
	// Duplicate name: refused, nothing made.
	_, err = c.CreateNetwork(ctx(t), natNetwork("contract-net", "10.251.2.0/24", "10.251.2.1"))
	wantHR(t, err, computenetwork.HCN_E_NETWORK_ALREADY_EXISTS, "Name")
	if !errdefs.IsAlreadyExists(err) {
		t.Errorf("%v is not errdefs AlreadyExists", err)
	}
	if all, _ := c.ListNetworks(ctx(t), Filter{"Name": "contract-net"}); len(all) != 1 {
		t.Errorf("after a refused duplicate, %d networks are named contract-net", len(all))
	}
	if err := c.DeleteNetwork(ctx(t), n.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNetwork(ctx(t), n.Id); !IsNotFound(err) {
		t.Fatalf("get after delete: %v, want not found", err)
	}
	wantHR(t, c.DeleteNetwork(ctx(t), n.Id), computenetwork.HCN_E_NETWORK_NOT_FOUND, "")
}

func TestContractBadNetworks(t *testing.T) {
	c := requireContract(t)
	before, err := c.ListNetworks(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		n     *hcn.HostComputeNetwork
		hr    computenetwork.HRESULT
		field string
	}{
		{"bad type", func() *hcn.HostComputeNetwork {
			n := natNetwork("bad-type", "10.251.3.0/24", "10.251.3.1")
			n.Type = "Bridgey"
			return n
		}(), computenetwork.HCN_E_INVALID_NETWORK_TYPE, "Type"},
		{"bad prefix", natNetwork("bad-prefix", "10.251.3.0/33", "10.251.3.1"), computenetwork.HCN_E_INVALID_IP, "IpAddressPrefix"},
		{"gateway outside", natNetwork("bad-gw", "10.251.3.0/24", "10.251.4.1"), computenetwork.HCN_E_INVALID_IP, "NextHop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateNetwork(ctx(t), tc.n)
			wantHR(t, err, tc.hr, tc.field)
		})
	}
	after, err := c.ListNetworks(ctx(t), nil)
	if err != nil || len(after) != len(before) {
		t.Errorf("refused creates changed the networks: %d before, %d after (%v)", len(before), len(after), err)
	}
}

func TestContractEndpoints(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("contract-ep", "10.251.5.0/24", "10.251.5.1"))
	ep, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{
		Name:             "ep-a",
		IpConfigurations: []hcn.IpConfig{{IpAddress: "10.251.5.10", PrefixLength: 24}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	if ep.HostComputeNetwork != n.Id || ep.IpConfigurations[0].IpAddress != "10.251.5.10" || ep.MacAddress == "" {
		t.Errorf("created %+v", ep)
	}
	auto, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Name: "ep-auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), auto.Id) })
	if ip := auto.IpConfigurations[0].IpAddress; !strings.HasPrefix(ip, "10.251.5.") || ip == "10.251.5.10" || ip == "10.251.5.1" {
		t.Errorf("allocated %q: not a free address of 10.251.5.0/24", ip)
	}
	of, err := c.ListEndpoints(ctx(t), Filter{"VirtualNetwork": n.Id})
	if err != nil || len(of) != 2 {
		t.Errorf("endpoints of the network: %d, %v; want 2", len(of), err)
	}

	bad := []struct {
		name    string
		network string
		ep      hcn.HostComputeEndpoint
		hr      computenetwork.HRESULT
		field   string
	}{
		{"outside subnet", n.Id, hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.251.6.10"}}}, computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].IpAddress"},
		{"in use", n.Id, hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.251.5.10"}}}, computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "IpConfigurations[0].IpAddress"},
		{"gateway", n.Id, hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.251.5.1"}}}, computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "gateway"},
		{"unknown network", "0b0e5f3c-1111-4222-8333-944455556666", hcn.HostComputeEndpoint{}, computenetwork.HCN_E_NETWORK_NOT_FOUND, "0b0e5f3c-1111-4222-8333-944455556666"},
		{"bad MAC", n.Id, hcn.HostComputeEndpoint{MacAddress: "00-15-5D-XX-00-01"}, computenetwork.E_INVALIDARG, "MacAddress"},
		{"bad policy", n.Id, hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{{Type: "Teleport"}}}, computenetwork.HCN_E_INVALID_POLICY_TYPE, "Policies[0].Type"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateEndpoint(ctx(t), tc.network, &tc.ep)
			wantHR(t, err, tc.hr, tc.field)
		})
	}
	if all, _ := c.ListEndpoints(ctx(t), Filter{"VirtualNetwork": n.Id}); len(all) != 2 {
		t.Errorf("refused creates left endpoints: %d on the network, want 2", len(all))
	}
}

func portMapping(t *testing.T, proto uint32, external, internal uint16) hcn.EndpointPolicy {
	b, err := json.Marshal(hcn.PortMappingPolicySetting{Protocol: proto, ExternalPort: external, InternalPort: internal})
	if err != nil {
		t.Fatal(err)
	}
	return hcn.EndpointPolicy{Type: hcn.PortMapping, Settings: b}
}

func TestContractPortMappings(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("contract-ports", "10.251.7.0/24", "10.251.7.1"))
	a, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{portMapping(t, 6, 18080, 80)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), a.Id) })
	_, err = c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{portMapping(t, 6, 18080, 81)}})
	wantHR(t, err, computenetwork.HCN_E_PORT_ALREADY_EXISTS, "ExternalPort")
	// The same port in UDP is another mapping.
	u, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{portMapping(t, 17, 18080, 80)}})
	if err != nil {
		t.Fatal(err)
	}
	c.DeleteEndpoint(ctx(t), u.Id)
	_, err = c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{portMapping(t, 1, 18081, 80)}})
	wantHR(t, err, computenetwork.HCN_E_INVALID_POLICY, "Protocol")
	// Removing the mapping frees the port.
	if err := c.ModifyEndpointPolicies(ctx(t), a.Id, hcn.RequestRemove, []hcn.EndpointPolicy{portMapping(t, 6, 18080, 80)}); err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{Policies: []hcn.EndpointPolicy{portMapping(t, 6, 18080, 80)}})
	if err != nil {
		t.Fatalf("after the mapping was removed: %v", err)
	}
	c.DeleteEndpoint(ctx(t), b.Id)
}

func TestContractNamespaces(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("contract-ns", "10.251.8.0/24", "10.251.8.1"))
	ep, err := c.CreateEndpoint(ctx(t), n.Id, &hcn.HostComputeEndpoint{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	ns1, err := c.CreateNamespace(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteNamespace(context.Background(), ns1.Id) })
	ns2, err := c.CreateNamespace(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteNamespace(context.Background(), ns2.Id) })
	if ns1.Type != hcn.NamespaceHost || ns1.NamespaceId == 0 || ns1.NamespaceId == ns2.NamespaceId {
		t.Errorf("namespaces %+v and %+v: want Host, distinct compartments", ns1, ns2)
	}
	if err := c.AddNamespaceEndpoint(ctx(t), ns1.Id, ep.Id); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetNamespace(ctx(t), ns1.Id)
	if err != nil {
		t.Fatal(err)
	}
	if eps, _ := NamespaceResources(got); len(eps) != 1 || eps[0] != ep.Id {
		t.Errorf("namespace resources %+v, want endpoint %s", got.Resources, ep.Id)
	}
	if e, err := c.GetEndpoint(ctx(t), ep.Id); err != nil || e.HostComputeNamespace != ns1.Id {
		t.Errorf("endpoint's HostComputeNamespace = %q (%v), want %s", e.HostComputeNamespace, err, ns1.Id)
	}
	// Already in another namespace: refused, the first keeps it.
	wantHR(t, c.AddNamespaceEndpoint(ctx(t), ns2.Id, ep.Id), computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, ns1.Id)
	if got, _ := c.GetNamespace(ctx(t), ns2.Id); len(got.Resources) != 0 {
		t.Errorf("the refused namespace has %+v", got.Resources)
	}
	wantHR(t, c.AddNamespaceEndpoint(ctx(t), ns1.Id, ep.Id), computenetwork.HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS, "")
	wantHR(t, c.AddNamespaceEndpoint(ctx(t), ns1.Id, "0b0e5f3c-1111-4222-8333-944455556666"), computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "")
	// An unknown namespace is ERROR_NOT_FOUND, as hcsshim's IsElementNotFoundError expects.
	_, err = c.GetNamespace(ctx(t), "0b0e5f3c-1111-4222-8333-944455556666")
	wantHR(t, err, computenetwork.E_ELEMENT_NOT_FOUND, "")
	if err := c.RemoveNamespaceEndpoint(ctx(t), ns1.Id, ep.Id); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.GetEndpoint(ctx(t), ep.Id); e.HostComputeNamespace != "" {
		t.Errorf("after remove, the endpoint is in %q", e.HostComputeNamespace)
	}
	if err := c.AddNamespaceEndpoint(ctx(t), ns2.Id, ep.Id); err != nil {
		t.Fatalf("after removal from the first namespace: %v", err)
	}
	// Deleting the endpoint detaches it.
	if err := c.DeleteEndpoint(ctx(t), ep.Id); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetNamespace(ctx(t), ns2.Id); len(got.Resources) != 0 {
		t.Errorf("after the endpoint's delete the namespace has %+v", got.Resources)
	}
}

func TestContractV1(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, natNetwork("contract-v1", "10.251.9.0/24", "10.251.9.1"))
	out, err := c.HNSCall(ctx(t), "GET", "/networks/"+n.Id, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v1 hcn.HNSNetwork
	if err := json.Unmarshal(out, &v1); err != nil {
		t.Fatal(err)
	}
	if v1.Id != n.Id || v1.Name != "contract-v1" || len(v1.Subnets) != 1 || v1.Subnets[0].GatewayAddress != "10.251.9.1" {
		t.Errorf("v1 network %+v", v1)
	}
	out, err = c.HNSCall(ctx(t), "POST", "/endpoints/", map[string]any{
		"VirtualNetworkName": "contract-v1", "IPAddress": "10.251.9.20", "PrefixLength": 24,
		"Policies": []any{map[string]any{"Type": "NAT", "Protocol": "TCP", "InternalPort": 80, "ExternalPort": 18090}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ep hcn.HNSEndpoint
	if err := json.Unmarshal(out, &ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	v2, err := c.GetEndpoint(ctx(t), ep.Id)
	if err != nil || v2.IpConfigurations[0].IpAddress != "10.251.9.20" || len(v2.Policies) != 1 || v2.Policies[0].Type != hcn.PortMapping {
		t.Errorf("the v1 endpoint seen through v2: %+v, %v", v2, err)
	}
	if _, err := c.HNSCall(ctx(t), "GET", "/endpoints/"+"0b0e5f3c-1111-4222-8333-944455556666", nil); err == nil {
		t.Error("GET of an unknown endpoint succeeded")
	}
}

func TestContractCancelled(t *testing.T) {
	c := requireContract(t)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.CreateNetwork(cctx, natNetwork("contract-cancelled", "10.251.10.0/24", "10.251.10.1"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a cancelled context: %v", err)
	}
	if all, _ := c.ListNetworks(ctx(t), Filter{"Name": "contract-cancelled"}); len(all) != 0 {
		t.Errorf("a create with a cancelled context made %d networks", len(all))
	}
}
