package hns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// fakeDataplane records what HNS asks of the kernel and can be told to fail, so that the
// object model's validation and its "nothing half-made" rule are tested without root.
type fakeDataplane struct {
	networks, namespaces, attached map[string]bool
	rules                          int
	lbRules                        []lbRule
	fail                           string // the method that fails next
}

func newFakeDataplane() *fakeDataplane {
	return &fakeDataplane{networks: map[string]bool{}, namespaces: map[string]bool{}, attached: map[string]bool{}}
}

func (f *fakeDataplane) failing(m string) error {
	if f.fail == m {
		f.fail = ""
		return fmt.Errorf("injected failure of %s", m)
	}
	return nil
}

func (f *fakeDataplane) addNetwork(n *hnsNetwork) error {
	if err := f.failing("addNetwork"); err != nil {
		return err
	}
	f.networks[n.doc.Id] = true
	n.link = "br"
	return nil
}
func (f *fakeDataplane) delNetwork(n *hnsNetwork) error { delete(f.networks, n.doc.Id); return nil }
func (f *fakeDataplane) addNamespace(ns *hnsNamespace) error {
	if err := f.failing("addNamespace"); err != nil {
		return err
	}
	f.namespaces[ns.doc.Id] = true
	ns.path = "/netns/" + ns.doc.Id
	return nil
}
func (f *fakeDataplane) delNamespace(ns *hnsNamespace) error {
	delete(f.namespaces, ns.doc.Id)
	return nil
}
func (f *fakeDataplane) attach(ep *hnsEndpoint, ns *hnsNamespace, index int) error {
	if err := f.failing("attach"); err != nil {
		return err
	}
	f.attached[ep.doc.Id] = true
	return nil
}
func (f *fakeDataplane) detach(ep *hnsEndpoint) error { delete(f.attached, ep.doc.Id); return nil }
func (f *fakeDataplane) setRules(n []*hnsNetwork, e []*hnsEndpoint, lbs []lbRule, remote []netip.Addr) error {
	if err := f.failing("setRules"); err != nil {
		return err
	}
	f.rules = len(n) + len(e)
	f.lbRules = lbs
	return nil
}
func (f *fakeDataplane) netnsPath(ns *hnsNamespace) string { return ns.path }
func (f *fakeDataplane) close() error                      { return nil }
func (f *fakeDataplane) counters(ep *hnsEndpoint) (hcn.EndpointStats, error) {
	if err := f.failing("counters"); err != nil {
		return hcn.EndpointStats{}, err
	}
	if !f.attached[ep.doc.Id] {
		return hcn.EndpointStats{}, nil
	}
	return hcn.EndpointStats{BytesReceived: 100, PacketsReceived: 2, BytesSent: 50, PacketsSent: 1}, nil
}

func networkDoc(name, subnet, gw string) string {
	b, _ := json.Marshal(hcn.HostComputeNetwork{Name: name, Type: hcn.NAT, Ipams: []hcn.Ipam{{Subnets: []hcn.Subnet{{
		IpAddressPrefix: subnet, Routes: []hcn.Route{{NextHop: gw, DestinationPrefix: "0.0.0.0/0"}},
	}}}}})
	return string(b)
}

func wantHRESULT(t *testing.T, err error, hr computenetwork.HRESULT, field string) {
	t.Helper()
	e := hresult.As(err)
	if err == nil || uint32(e.HResult) != uint32(hr) {
		t.Fatalf("error %v, want %v", err, hr)
	}
	if !strings.Contains(e.Message, field) {
		t.Fatalf("message %q does not name %q", e.Message, field)
	}
}

func TestHNSBadDocuments(t *testing.T) {
	ctx := context.Background()
	h := newService(newFakeDataplane(), build2022)
	netID, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, doc string
		hr        computenetwork.HRESULT
		field     string
	}{
		{"unknown field", `{"Name":"x","Typo":1}`, computenetwork.HCN_E_INVALID_JSON, "Typo"},
		{"wrong type", `{"Name":5}`, computenetwork.HCN_E_INVALID_JSON, "Name"},
		{"no subnet", `{"Name":"x","Type":"NAT"}`, computenetwork.HCN_E_SUBNET_NOT_FOUND, "Ipams"},
		{"no default route", `{"Name":"x","Ipams":[{"Subnets":[{"IpAddressPrefix":"10.1.0.0/24"}]}]}`, computenetwork.HCN_E_INVALID_IP, "Routes"},
		{"overlap", networkDoc("o", "10.0.0.128/25", "10.0.0.129"), computenetwork.HCN_E_INVALID_IP, "overlaps"},
		{"duplicate name", networkDoc("N", "10.2.0.0/24", "10.2.0.1"), computenetwork.HCN_E_NETWORK_ALREADY_EXISTS, "Name"},
		{"schema", `{"SchemaVersion":{"Major":1,"Minor":0}}`, computenetwork.E_INVALIDARG, "SchemaVersion"},
		{"bad policy", `{"Name":"p","Policies":[{"Type":"Nope"}],"Ipams":[{"Subnets":[{"IpAddressPrefix":"10.3.0.0/24","Routes":[{"NextHop":"10.3.0.1","DestinationPrefix":"0.0.0.0/0"}]}]}]}`, computenetwork.HCN_E_INVALID_POLICY_TYPE, "Policies[0].Type"},
	} {
		t.Run("network "+tc.name, func(t *testing.T) {
			_, err := h.CreateNetwork(ctx, "", tc.doc)
			wantHRESULT(t, err, tc.hr, tc.field)
		})
	}
	if len(h.networks) != 1 {
		t.Errorf("%d networks after refused creates, want 1", len(h.networks))
	}
	for _, tc := range []struct {
		name, doc string
		hr        computenetwork.HRESULT
		field     string
	}{
		{"namespace set", `{"HostComputeNamespace":"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"}`, computenetwork.E_INVALIDARG, "HostComputeNamespace"},
		{"other network", `{"HostComputeNetwork":"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"}`, computenetwork.E_INVALIDARG, "HostComputeNetwork"},
		{"bad ip", `{"IpConfigurations":[{"IpAddress":"10.0.0.300"}]}`, computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].IpAddress"},
		{"broadcast", `{"IpConfigurations":[{"IpAddress":"10.0.0.255"}]}`, computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "broadcast"},
		{"prefix", `{"IpConfigurations":[{"IpAddress":"10.0.0.7","PrefixLength":16}]}`, computenetwork.HCN_E_INVALID_IP, "PrefixLength"},
		{"route", `{"Routes":[{"DestinationPrefix":"0.0.0.0/0","NextHop":"192.168.1.1"}]}`, computenetwork.HCN_E_INVALID_IP, "Routes[0].NextHop"},
		{"port proto", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":1,"InternalPort":1,"ExternalPort":2}}]}`, computenetwork.HCN_E_INVALID_POLICY, "Protocol"},
		{"port internal", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"ExternalPort":2}}]}`, computenetwork.HCN_E_INVALID_INTERNAL_PORT, "InternalPort"},
		{"port settings", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"Extern":2}}]}`, computenetwork.HCN_E_INVALID_JSON, "Extern"},
		{"onat exception", `{"Policies":[{"Type":"OutBoundNAT","Settings":{"Exceptions":["10.0.0.0/99"]}}]}`, computenetwork.HCN_E_INVALID_IP, "Exceptions[0]"},
		{"port flags", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":1,"ExternalPort":2,"Flags":8}}]}`, computenetwork.HCN_E_INVALID_POLICY, "Settings.Flags"},
		{"port ipv6", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":1,"ExternalPort":2,"Flags":3}}]}`, computenetwork.E_NOTIMPL, "Settings.Flags"},
	} {
		t.Run("endpoint "+tc.name, func(t *testing.T) {
			_, err := h.CreateEndpoint(ctx, netID, "", tc.doc)
			wantHRESULT(t, err, tc.hr, tc.field)
		})
	}
	if len(h.endpoints) != 0 {
		t.Errorf("%d endpoints after refused creates", len(h.endpoints))
	}
	_, err = h.CreateEndpoint(ctx, "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11", "", `{}`)
	wantHRESULT(t, err, computenetwork.HCN_E_NETWORK_NOT_FOUND, "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11")
	_, err = h.CreateEndpoint(ctx, "not-a-guid", "", `{}`)
	wantHRESULT(t, err, computenetwork.HCN_E_GUID_CONVERSION_FAILURE, "not-a-guid")
	_, err = h.CreateNamespace(ctx, "", `{"Type":"Guest"}`)
	wantHRESULT(t, err, computenetwork.E_NOTIMPL, "Type")
	_, err = h.CreateNamespace(ctx, "", `{"NamespaceId":7}`)
	wantHRESULT(t, err, computenetwork.E_INVALIDARG, "NamespaceId")
}

// TestHNSNothingHalfMade makes the dataplane fail at each step and checks that the objects and
// the dataplane are as before.
func TestHNSNothingHalfMade(t *testing.T) {
	ctx := context.Background()
	dp := newFakeDataplane()
	h := newService(dp, build2022)
	dp.fail = "addNetwork"
	if _, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1")); err == nil {
		t.Fatal("create succeeded with a failing dataplane")
	}
	dp.fail = "setRules"
	if _, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1")); err == nil {
		t.Fatal("create succeeded with failing rules")
	}
	if len(h.networks) != 0 || len(dp.networks) != 0 {
		t.Fatalf("failed creates left networks %v / %v", h.networks, dp.networks)
	}
	netID, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	dp.fail = "setRules"
	if _, err := h.CreateEndpoint(ctx, netID, "", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":80,"ExternalPort":8080}}]}`); err == nil {
		t.Fatal("endpoint create succeeded with failing rules")
	}
	if len(h.endpoints) != 0 {
		t.Fatalf("a failed endpoint create left %d endpoints", len(h.endpoints))
	}
	// The port is free again: the failed create did not keep it.
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":80,"ExternalPort":8080}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	dp.fail = "addNamespace"
	if _, err := h.CreateNamespace(ctx, "", `{}`); err == nil {
		t.Fatal("namespace create succeeded with a failing dataplane")
	}
	if len(h.namespaces) != 0 || len(dp.namespaces) != 0 {
		t.Fatal("a failed namespace create left a namespace")
	}
	nsID, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	add := fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, epID)
	dp.fail = "attach"
	if err := h.ModifyNamespace(ctx, nsID, add); err == nil {
		t.Fatal("attach succeeded with a failing dataplane")
	}
	if h.endpoints[epID].namespace != nil || len(h.namespaces[nsID].endpoints) != 0 {
		t.Fatal("a failed attach recorded the endpoint in the namespace")
	}
	if err := h.ModifyNamespace(ctx, nsID, add); err != nil {
		t.Fatal(err)
	}
	// Deleting the network deletes its endpoint and detaches it.
	if err := h.DeleteNetwork(ctx, netID); err != nil {
		t.Fatal(err)
	}
	if len(h.endpoints) != 0 || len(dp.attached) != 0 || len(h.namespaces[nsID].endpoints) != 0 {
		t.Errorf("after the network's delete: endpoints %d, attached %v, namespace endpoints %d", len(h.endpoints), dp.attached, len(h.namespaces[nsID].endpoints))
	}
}

func TestHNSContainers(t *testing.T) {
	ctx := context.Background()
	h := newService(newFakeDataplane(), build2022)
	nsID, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := h.JoinContainer(strings.ToUpper(nsID), "c1"); err != nil || p != "/netns/"+nsID {
		t.Fatalf("join: %q, %v", p, err)
	}
	doc, _ := h.QueryNamespace(ctx, nsID, "")
	if !strings.Contains(doc, `"Type":"Container"`) || !strings.Contains(doc, `"ID":"c1"`) {
		t.Errorf("namespace %s does not list the container", doc)
	}
	h.LeaveContainer(nsID, "c1")
	if doc, _ := h.QueryNamespace(ctx, nsID, ""); strings.Contains(doc, `"ID":"c1"`) || strings.Contains(doc, `"Container"`) {
		t.Errorf("after leave, %s", doc)
	}
	_, err = h.JoinContainer("6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11", "c2")
	wantHRESULT(t, err, computenetwork.E_ELEMENT_NOT_FOUND, "Container.Networking.Namespace")
}

func TestHNSQueries(t *testing.T) {
	ctx := context.Background()
	h := newService(newFakeDataplane(), build2022)
	a, _ := h.CreateNetwork(ctx, "", networkDoc("alpha", "10.0.0.0/24", "10.0.0.1"))
	h.CreateNetwork(ctx, "", networkDoc("beta", "10.0.1.0/24", "10.0.1.1"))
	ids, err := h.EnumerateNetworks(ctx, `{"SchemaVersion":{"Major":2,"Minor":0},"Filter":"{\"Name\":\"ALPHA\"}"}`)
	if err != nil || ids != fmt.Sprintf("[%q]", a) {
		t.Errorf("filter by name: %s, %v", ids, err)
	}
	if ids, _ := h.EnumerateNetworks(ctx, ""); strings.Count(ids, ",") != 1 {
		t.Errorf("all networks: %s", ids)
	}
	_, err = h.EnumerateNetworks(ctx, `{"Filter":"{\"Colour\":\"red\"}"}`)
	wantHRESULT(t, err, computenetwork.E_INVALIDARG, "Filter.Colour")
	ep, _ := h.CreateEndpoint(ctx, a, "", `{}`)
	if ids, _ := h.EnumerateEndpoints(ctx, fmt.Sprintf(`{"Filter":"{\"VirtualNetwork\":\"%s\"}"}`, a)); ids != fmt.Sprintf("[%q]", ep) {
		t.Errorf("endpoints of alpha: %s", ids)
	}
	out := h.HNSCall(ctx, "GET", "/globals/version", "")
	if !strings.Contains(out, `"Success":true`) || !strings.Contains(out, `"Major":13`) {
		t.Errorf("version: %s", out)
	}
	out = h.HNSCall(ctx, "GET", "/nowhere/", "")
	if !strings.Contains(out, `"Success":false`) || !strings.Contains(out, "/nowhere/") {
		t.Errorf("unknown path: %s", out)
	}
	if err := errors.Unwrap(hresult.As(h.DeleteEndpoint(ctx, "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"))); err == nil {
		t.Error("delete of an unknown endpoint succeeded")
	}
}

// TestHNSEndpointStats: GET /endpointstats/<id> (hcsshim's GetHNSEndpointStats, which
// containerd's CRI calls for a Windows pod's network stats) answers an attached endpoint's
// counters from the dataplane, zeros for one never attached, and fails for an unknown one.
func TestHNSEndpointStats(t *testing.T) {
	ctx := context.Background()
	dp := newFakeDataplane()
	h := newService(dp, build2022)
	netID, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	stats := func(id string) (hcn.EndpointStats, hcn.Response) {
		t.Helper()
		var resp hcn.Response
		if err := json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpointstats/"+id, "")), &resp); err != nil {
			t.Fatal(err)
		}
		var st hcn.EndpointStats
		if resp.Success {
			if err := json.Unmarshal(resp.Output, &st); err != nil {
				t.Fatal(err)
			}
		}
		return st, resp
	}
	if st, resp := stats(epID); !resp.Success || st != (hcn.EndpointStats{EndpointID: epID, InstanceID: epID}) {
		t.Errorf("endpoint never attached: %+v, %+v; want zero counters", st, resp)
	}
	nsID, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	add := fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, epID)
	if err := h.ModifyNamespace(ctx, nsID, add); err != nil {
		t.Fatal(err)
	}
	want := hcn.EndpointStats{BytesReceived: 100, PacketsReceived: 2, BytesSent: 50, PacketsSent: 1, EndpointID: epID, InstanceID: epID}
	if st, resp := stats(epID); !resp.Success || st != want {
		t.Errorf("attached endpoint: %+v, %+v; want %+v", st, resp, want)
	}
	dp.fail = "counters"
	if _, resp := stats(epID); resp.Success || !strings.Contains(resp.Error, epID) {
		t.Errorf("failing dataplane: %+v; want a failure naming the endpoint", resp)
	}
	dp.fail = ""
	if _, resp := stats("6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"); resp.Success {
		t.Errorf("unknown endpoint: %+v; want a failure", resp)
	}
}

// TestHostReachOf: what a Windows host reaches of its own port mappings, by network type, the
// mapping's LocalRoutedVip flag and the host's build (the sources are at hostReachOf): WinNAT
// maps localhost from Windows Server 2019 (1809) and nothing of the host's own before; VFP
// (L2Bridge) maps the host's addresses only with LocalRoutedVip on Windows Server 2022 and
// later, and never 127.0.0.1 (assumption).
func TestHostReachOf(t *testing.T) {
	const build2016, build2025 = 14393, 26100
	for _, tc := range []struct {
		netType string
		flags   uint32
		build   uint32
		want    hostReach
	}{
		{hcn.NAT, 0, build2016, reachNone},
		{hcn.NAT, 0, build1809, reachLoopback},
		{hcn.NAT, 0, build2022, reachLoopback},
		{hcn.NAT, natFlagsLocalRoutedVip, build2025, reachLoopback},
		{hcn.L2Bridge, 0, build2016, reachNone},
		{hcn.L2Bridge, 0, build2022, reachNone},
		{hcn.L2Bridge, 0, build2025, reachNone},
		{hcn.L2Bridge, natFlagsLocalRoutedVip, build1809, reachNone},
		{hcn.L2Bridge, natFlagsLocalRoutedVip, build2022, reachAddresses},
		{hcn.L2Bridge, natFlagsLocalRoutedVip, build2025, reachAddresses},
	} {
		if got := hostReachOf(tc.netType, tc.flags, tc.build); got != tc.want {
			t.Errorf("hostReachOf(%s, flags %d, build %d) = %d, want %d", tc.netType, tc.flags, tc.build, got, tc.want)
		}
	}
}
