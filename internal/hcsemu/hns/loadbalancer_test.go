package hns

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// lbFixture is a service on the fake dataplane with an L2Bridge network 10.0.0.0/24, two local
// endpoints (.10, .11) and a remote one (another node's pod, 10.0.1.20).
type lbFixture struct {
	h                   *Service
	dp                  *fakeDataplane
	net, a, b, remoteEP string
	ctx                 context.Context
}

func newLBFixture(t *testing.T) *lbFixture {
	t.Helper()
	f := &lbFixture{dp: newFakeDataplane(), ctx: context.Background()}
	f.h = newService(f.dp, build2022)
	b, _ := json.Marshal(hcn.HostComputeNetwork{Name: "cbr0", Type: hcn.L2Bridge, Ipams: []hcn.Ipam{{Subnets: []hcn.Subnet{{
		IpAddressPrefix: "10.0.0.0/24", Routes: []hcn.Route{{NextHop: "10.0.0.1", DestinationPrefix: "0.0.0.0/0"}},
	}}}}})
	var err error
	if f.net, err = f.h.CreateNetwork(f.ctx, "", string(b)); err != nil {
		t.Fatal(err)
	}
	ep := func(doc hcn.HostComputeEndpoint) string {
		t.Helper()
		b, _ := json.Marshal(doc)
		id, err := f.h.CreateEndpoint(f.ctx, f.net, "", string(b))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	f.a = ep(hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.0.10"}}})
	f.b = ep(hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.0.11"}}})
	// What kube-proxy sends for a backend on another node (winkernel/hns.go createEndpoint).
	f.remoteEP = ep(hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.1.20"}},
		Flags: hcn.EndpointFlagsRemoteEndpoint, SchemaVersion: hcn.V2})
	return f
}

func (f *lbFixture) doc(mut func(*hcn.HostComputeLoadBalancer)) string {
	d := hcn.HostComputeLoadBalancer{
		HostComputeEndpoints: []string{f.a, f.b},
		FrontendVIPs:         []string{"10.96.0.10"},
		PortMappings:         []hcn.LoadBalancerPortMapping{{Protocol: 6, InternalPort: 8080, ExternalPort: 80}},
		SchemaVersion:        hcn.V2,
	}
	if mut != nil {
		mut(&d)
	}
	b, _ := json.Marshal(d)
	return string(b)
}

func TestLoadBalancerDocuments(t *testing.T) {
	f := newLBFixture(t)
	for _, tc := range []struct {
		name  string
		doc   string
		hr    computenetwork.HRESULT
		field string
	}{
		{"unknown field", `{"HostComputeEndpoints":["` + f.a + `"],"Frontend":"x"}`, computenetwork.HCN_E_INVALID_JSON, "Frontend"},
		{"no endpoints", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.HostComputeEndpoints = nil }), computenetwork.E_INVALIDARG, "HostComputeEndpoints"},
		{"unknown endpoint", f.doc(func(d *hcn.HostComputeLoadBalancer) {
			d.HostComputeEndpoints = []string{f.a, "0b0e5f3c-1111-4222-8333-944455556666"}
		}), computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "HostComputeEndpoints[1]"},
		{"endpoint not a GUID", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.HostComputeEndpoints = []string{"pod-a"} }),
			computenetwork.HCN_E_GUID_CONVERSION_FAILURE, "HostComputeEndpoints[0]"},
		{"endpoint twice", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.HostComputeEndpoints = []string{f.a, strings.ToUpper(f.a)} }),
			computenetwork.E_INVALIDARG, "HostComputeEndpoints[1]"},
		{"bad VIP", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.FrontendVIPs = []string{"10.96.0.300"} }), computenetwork.HCN_E_INVALID_IP, `FrontendVIPs[0]: "10.96.0.300"`},
		{"IPv6 VIP", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.FrontendVIPs = []string{"fd00::10"} }), computenetwork.HCN_E_INVALID_IP, "FrontendVIPs[0]"},
		{"bad source VIP", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.SourceVIP = "node" }), computenetwork.HCN_E_INVALID_IP, `SourceVIP: "node"`},
		{"no port mapping", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings = nil }), computenetwork.E_INVALIDARG, "PortMappings"},
		{"SCTP", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].Protocol = 132 }), computenetwork.HCN_E_INVALID_POLICY, "PortMappings[0].Protocol: 132"},
		{"no internal port", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].InternalPort = 0 }), computenetwork.HCN_E_INVALID_INTERNAL_PORT, "PortMappings[0].InternalPort"},
		{"no external port", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].ExternalPort = 0 }), computenetwork.HCN_E_INVALID_POLICY, "PortMappings[0].ExternalPort"},
		{"bad distribution", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].DistributionType = 3 }), computenetwork.E_INVALIDARG, "PortMappings[0].DistributionType: 3"},
		{"bad port flags", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].Flags = 32 }), computenetwork.E_INVALIDARG, "PortMappings[0].Flags: 0x20"},
		{"port twice", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings = append(d.PortMappings, d.PortMappings[0]) }),
			computenetwork.HCN_E_PORT_ALREADY_EXISTS, "PortMappings[1].ExternalPort"},
		{"bad flags", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.Flags = 4 }), computenetwork.E_INVALIDARG, "Flags: 0x4"},
		{"IPv6", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.Flags = hcn.LoadBalancerFlagsIPv6 }), computenetwork.E_NOTIMPL, "Flags"},
		{"schema 1", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.SchemaVersion = hcn.Version{Major: 1} }), computenetwork.E_INVALIDARG, "SchemaVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.h.CreateLoadBalancer(f.ctx, "", tc.doc)
			wantHRESULT(t, err, tc.hr, tc.field)
			if len(f.h.loadBalancers) != 0 || len(f.dp.lbRules) != 0 {
				t.Fatalf("a refused load balancer left %d load balancers, %d rules", len(f.h.loadBalancers), len(f.dp.lbRules))
			}
		})
	}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	f := newLBFixture(t)
	// A ClusterIP with a local and a remote backend, session affinity.
	id, err := f.h.CreateLoadBalancer(f.ctx, "", f.doc(func(d *hcn.HostComputeLoadBalancer) {
		d.HostComputeEndpoints = []string{f.a, f.remoteEP}
		d.PortMappings[0].DistributionType = hcn.LoadBalancerDistributionSourceIP
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.dp.lbRules) != 1 {
		t.Fatalf("rules %+v", f.dp.lbRules)
	}
	r := f.dp.lbRules[0]
	if r.outside || !r.fromHost || !r.affinity || r.link != "br" || len(r.backends) != 2 || r.backends[1].String() != "10.0.1.20" {
		t.Errorf("ClusterIP rule %+v", r)
	}
	// The same frontend again: HCN_E_PORT_ALREADY_EXISTS, which kube-proxy answers by replacing.
	_, err = f.h.CreateLoadBalancer(f.ctx, "", f.doc(nil))
	wantHRESULT(t, err, computenetwork.HCN_E_PORT_ALREADY_EXISTS, "PortMappings[0].ExternalPort")
	// The same port on another VIP, or UDP, is another frontend.
	other, err := f.h.CreateLoadBalancer(f.ctx, "", f.doc(func(d *hcn.HostComputeLoadBalancer) { d.PortMappings[0].Protocol = 17 }))
	if err != nil {
		t.Fatal(err)
	}
	// A NodePort as kube-proxy makes it: no VIP, LocalRoutedVIP|VipExternalIP.
	np, err := f.h.CreateLoadBalancer(f.ctx, "", f.doc(func(d *hcn.HostComputeLoadBalancer) {
		d.FrontendVIPs = nil
		d.PortMappings[0].ExternalPort = 30080
		d.PortMappings[0].Flags = hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP | hcn.LoadBalancerPortMappingFlagsVipExternalIP
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.dp.lbRules) != 3 {
		t.Fatalf("%d rules, want 3", len(f.dp.lbRules))
	}

	// Enumerate with hnslib's ID filter (GetLoadBalancerByID), and query.
	ids, err := f.h.EnumerateLoadBalancers(f.ctx, `{"SchemaVersion":{"Major":2,"Minor":0},"Filter":"{\"ID\":\"`+strings.ToUpper(np)+`\"}"}`)
	if err != nil || ids != `["`+np+`"]` {
		t.Errorf("enumerate by ID: %s, %v", ids, err)
	}
	_, err = f.h.EnumerateLoadBalancers(f.ctx, `{"Filter":"{\"Port\":80}"}`)
	wantHRESULT(t, err, computenetwork.E_INVALIDARG, "Filter.Port")
	props, err := f.h.QueryLoadBalancer(f.ctx, np, `{"SchemaVersion":{"Major":2,"Minor":0},"Filter":"{\"ID\":\"`+np+`\"}"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got hcn.HostComputeLoadBalancer
	if err := json.Unmarshal([]byte(props), &got); err != nil || got.Id != np || got.PortMappings[0].ExternalPort != 30080 || got.SchemaVersion != hcn.V2 {
		t.Errorf("query: %s, %v", props, err)
	}

	// Modify replaces the document; a conflict leaves the old one.
	if err := f.h.ModifyLoadBalancer(f.ctx, other, f.doc(nil)); err == nil {
		t.Error("modify onto another load balancer's frontend succeeded")
	}
	if err := f.h.ModifyLoadBalancer(f.ctx, other, f.doc(func(d *hcn.HostComputeLoadBalancer) {
		d.PortMappings[0].Protocol = 17
		d.HostComputeEndpoints = []string{f.b}
	})); err != nil {
		t.Fatal(err)
	}
	if lb := f.h.loadBalancers[other]; len(lb.endpoints) != 1 || lb.endpoints[0] != f.b {
		t.Errorf("after modify: %+v", lb.endpoints)
	}

	// v1 GET /policylists/ (kube-proxy's start-up check).
	var pls []hcn.PolicyList
	resp := f.h.HNSCall(f.ctx, "GET", "/policylists/", "")
	var r1 hcn.Response
	if err := json.Unmarshal([]byte(resp), &r1); err != nil || !r1.Success || json.Unmarshal(r1.Output, &pls) != nil || len(pls) != 3 {
		t.Errorf("GET /policylists/: %s", resp)
	}

	// A deleted backend stops receiving; deleting the load balancers leaves no rule.
	if err := f.h.DeleteEndpoint(f.ctx, f.remoteEP); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.dp.lbRules {
		for _, b := range r.backends {
			if b.String() == "10.0.1.20" {
				t.Errorf("the deleted endpoint is still a backend: %+v", r)
			}
		}
	}
	for _, lb := range []string{id, other, np} {
		if err := f.h.DeleteLoadBalancer(f.ctx, lb); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.dp.lbRules) != 0 {
		t.Errorf("after deleting every load balancer: %+v", f.dp.lbRules)
	}
	wantHRESULT(t, f.h.DeleteLoadBalancer(f.ctx, id), computenetwork.E_ELEMENT_NOT_FOUND, id)
	_, err = f.h.OpenLoadBalancer(f.ctx, id)
	wantHRESULT(t, err, computenetwork.E_ELEMENT_NOT_FOUND, id)
}

func TestRemoteEndpoints(t *testing.T) {
	f := newLBFixture(t)
	var doc hcn.HostComputeEndpoint
	props, err := f.h.QueryEndpoint(f.ctx, f.remoteEP, "")
	if err != nil || json.Unmarshal([]byte(props), &doc) != nil {
		t.Fatal(props, err)
	}
	if doc.Flags != hcn.EndpointFlagsRemoteEndpoint || doc.IpConfigurations[0].IpAddress != "10.0.1.20" || doc.IpConfigurations[0].PrefixLength != 32 {
		t.Errorf("remote endpoint %+v", doc)
	}
	create := func(d hcn.HostComputeEndpoint) error {
		b, _ := json.Marshal(d)
		_, err := f.h.CreateEndpoint(f.ctx, f.net, "", string(b))
		return err
	}
	// A local endpoint is still held to its subnet; a remote one needs its address.
	wantHRESULT(t, create(hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.1.21"}}}), computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].IpAddress")
	wantHRESULT(t, create(hcn.HostComputeEndpoint{Flags: 1}), computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "IpConfigurations")
	wantHRESULT(t, create(hcn.HostComputeEndpoint{Flags: 1, IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.0.1"}}}), computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "gateway")
	pa, _ := json.Marshal(hcn.ProviderAddressEndpointPolicySetting{ProviderAddress: "node-b"})
	wantHRESULT(t, create(hcn.HostComputeEndpoint{Flags: 1, IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.2.5"}},
		Policies: []hcn.EndpointPolicy{{Type: hcn.NetworkProviderAddress, Settings: pa}}}), computenetwork.HCN_E_INVALID_IP, `Policies[0].Settings.ProviderAddress: "node-b"`)
	pa, _ = json.Marshal(hcn.ProviderAddressEndpointPolicySetting{ProviderAddress: "192.168.50.12"})
	if err := create(hcn.HostComputeEndpoint{Flags: 1, IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.2.5"}},
		Policies: []hcn.EndpointPolicy{{Type: hcn.NetworkProviderAddress, Settings: pa}}}); err != nil {
		t.Errorf("a remote endpoint with a provider address: %v", err)
	}
	// A remote endpoint cannot join a namespace.
	ns, err := f.h.CreateNamespace(f.ctx, "", `{"Type":"Host"}`)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(hcn.NamespaceEndpointRequest{EndpointId: f.remoteEP})
	mod, _ := json.Marshal(hcn.ModifyNamespaceSettingRequest{ResourceType: hcn.ResourceEndpoint, RequestType: hcn.RequestAdd, Settings: req})
	wantHRESULT(t, f.h.ModifyNamespace(f.ctx, ns, string(mod)), computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "remote")
}

func TestLoadBalancerNFTRules(t *testing.T) {
	f := newLBFixture(t)
	for _, tc := range []struct {
		name string
		mut  func(*hcn.HostComputeLoadBalancer)
		want []string
	}{
		{"ClusterIP, one backend", func(d *hcn.HostComputeLoadBalancer) { d.HostComputeEndpoints = []string{f.a} }, []string{
			`add rule ip t prerouting iifname { "br" } ip daddr { 10.96.0.10 } tcp dport 80 dnat to 10.0.0.10:8080`,
			`add rule ip t output ip daddr != 127.0.0.0/8 ip daddr { 10.96.0.10 } tcp dport 80 dnat to 10.0.0.10:8080`,
		}},
		{"ClusterIP, spread", nil, []string{
			`add rule ip t prerouting iifname { "br" } ip daddr { 10.96.0.10 } tcp dport 80 dnat to numgen random mod 2 map { 0 : 10.0.0.10, 1 : 10.0.0.11 } : 8080`,
			`add rule ip t output ip daddr != 127.0.0.0/8 ip daddr { 10.96.0.10 } tcp dport 80 dnat to numgen random mod 2 map { 0 : 10.0.0.10, 1 : 10.0.0.11 } : 8080`,
		}},
		{"UDP, affinity", func(d *hcn.HostComputeLoadBalancer) {
			d.PortMappings[0].Protocol = 17
			d.PortMappings[0].DistributionType = hcn.LoadBalancerDistributionSourceIP
		}, []string{
			`add rule ip t prerouting iifname { "br" } ip daddr { 10.96.0.10 } udp dport 80 dnat to jhash ip saddr mod 2 map { 0 : 10.0.0.10, 1 : 10.0.0.11 } : 8080`,
			`add rule ip t output ip daddr != 127.0.0.0/8 ip daddr { 10.96.0.10 } udp dport 80 dnat to jhash ip saddr mod 2 map { 0 : 10.0.0.10, 1 : 10.0.0.11 } : 8080`,
		}},
		{"NodePort", func(d *hcn.HostComputeLoadBalancer) {
			d.FrontendVIPs = nil
			d.HostComputeEndpoints = []string{f.b}
			d.PortMappings[0].ExternalPort = 30080
			d.PortMappings[0].Flags = hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP | hcn.LoadBalancerPortMappingFlagsVipExternalIP
		}, []string{
			`add rule ip t prerouting fib daddr type local tcp dport 30080 dnat to 10.0.0.11:8080`,
			`add rule ip t output ip daddr != 127.0.0.0/8 fib daddr type local tcp dport 30080 dnat to 10.0.0.11:8080`,
		}},
		{"NodePort without LocalRoutedVIP", func(d *hcn.HostComputeLoadBalancer) {
			d.FrontendVIPs = nil
			d.HostComputeEndpoints = []string{f.b}
			d.PortMappings[0].ExternalPort = 30080
		}, []string{
			`add rule ip t prerouting fib daddr type local tcp dport 30080 dnat to 10.0.0.11:8080`,
		}},
		{"external IP", func(d *hcn.HostComputeLoadBalancer) {
			d.FrontendVIPs = []string{"192.168.50.200"}
			d.HostComputeEndpoints = []string{f.b}
			d.PortMappings[0].Flags = hcn.LoadBalancerPortMappingFlagsVipExternalIP
		}, []string{
			`add rule ip t prerouting ip daddr { 192.168.50.200 } tcp dport 80 dnat to 10.0.0.11:8080`,
			`add rule ip t output ip daddr != 127.0.0.0/8 ip daddr { 192.168.50.200 } tcp dport 80 dnat to 10.0.0.11:8080`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := f.h.CreateLoadBalancer(f.ctx, "", f.doc(tc.mut))
			if err != nil {
				t.Fatal(err)
			}
			defer f.h.DeleteLoadBalancer(f.ctx, id)
			if len(f.dp.lbRules) != 1 {
				t.Fatalf("%d rules", len(f.dp.lbRules))
			}
			got := f.dp.lbRules[0].nftRules("t", []string{"br"})
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
