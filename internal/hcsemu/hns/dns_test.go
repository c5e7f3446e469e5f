package hns

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// TestEndpointDns: an endpoint keeps its Dns (HCN v2), v1's DNSServerList, DNSSuffix and
// DNSDomain are the same settings as comma-separated lists both ways (as win-bridge writes and
// reads them), and bad settings are refused naming the field, leaving nothing.
func TestEndpointDns(t *testing.T) {
	h := newService(newFakeDataplane(), build2022)
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("dns-net", "10.254.7.0/24", "10.254.7.1"))
	if err != nil {
		t.Fatal(err)
	}
	want := hcn.Dns{Domain: "default.svc.cluster.local", Search: []string{"svc.cluster.local", "cluster.local"},
		ServerList: []string{"10.10.10.10", "10.10.10.11"}, Options: []string{"ndots:5"}}
	b, _ := json.Marshal(hcn.HostComputeEndpoint{Dns: want})
	ep, err := h.CreateEndpoint(ctx, netID, "", string(b))
	if err != nil {
		t.Fatal(err)
	}
	var got hcn.HostComputeEndpoint
	d, _ := h.QueryEndpoint(ctx, ep, "")
	if err := json.Unmarshal([]byte(d), &got); err != nil {
		t.Fatal(err)
	}
	if !sameDns(got.Dns, want) {
		t.Errorf("v2 Dns %+v, want %+v", got.Dns, want)
	}
	var v1 struct{ Output hcn.HNSEndpoint }
	json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpoints/"+ep, "")), &v1)
	if o := v1.Output; o.DNSServerList != "10.10.10.10,10.10.10.11" || o.DNSSuffix != "svc.cluster.local,cluster.local" || o.DNSDomain != "default.svc.cluster.local" {
		t.Errorf("v1 view: DNSServerList %q, DNSSuffix %q, DNSDomain %q", o.DNSServerList, o.DNSSuffix, o.DNSDomain)
	}

	// win-bridge's v1 mode (pkg/hns GenerateHnsEndpoint): servers and searches joined by commas.
	resp := h.HNSCall(ctx, "POST", "/endpoints/", `{"VirtualNetwork":"`+netID+`","DNSServerList":"10.10.10.10,10.10.10.12","DNSSuffix":"google.com"}`)
	if err := json.Unmarshal([]byte(resp), &v1); err != nil || v1.Output.Id == "" {
		t.Fatalf("v1 create: %s", resp)
	}
	d, _ = h.QueryEndpoint(ctx, v1.Output.Id, "")
	got = hcn.HostComputeEndpoint{}
	json.Unmarshal([]byte(d), &got)
	if w := (hcn.Dns{Search: []string{"google.com"}, ServerList: []string{"10.10.10.10", "10.10.10.12"}}); !sameDns(got.Dns, w) {
		t.Errorf("v2 Dns of a v1 endpoint %+v, want %+v", got.Dns, w)
	}

	before := len(h.endpoints)
	for _, c := range []struct {
		doc   string
		hr    computenetwork.HRESULT
		field string
	}{
		{`{"Dns":{"ServerList":["10.10.10.10","dns.example"]}}`, computenetwork.HCN_E_INVALID_IP, "Dns.ServerList[1]"},
		{`{"Dns":{"Search":["a b"]}}`, computenetwork.E_INVALIDARG, "Dns.Search[0]"},
		{`{"Dns":{"Search":["a,b"]}}`, computenetwork.E_INVALIDARG, "Dns.Search[0]"},
		{`{"Dns":{"Domain":"x;y"}}`, computenetwork.E_INVALIDARG, "Dns.Domain"},
		{`{"Dns":{"Options":[""]}}`, computenetwork.E_INVALIDARG, "Dns.Options[0]"},
		{`{"Dns":{"Servers":["10.10.10.10"]}}`, computenetwork.HCN_E_INVALID_JSON, "Servers"},
	} {
		_, err := h.CreateEndpoint(ctx, netID, "", c.doc)
		wantHRESULT(t, err, c.hr, c.field)
	}
	for _, c := range []struct{ doc, field string }{
		{`{"VirtualNetwork":"` + netID + `","DNSServerList":"10.10.10.10,nine"}`, "DNSServerList"},
		{`{"VirtualNetwork":"` + netID + `","DNSSuffix":"a b"}`, "DNSSuffix"},
		{`{"VirtualNetwork":"` + netID + `","DNSDomain":"a;b"}`, "DNSDomain"},
	} {
		var r hcn.Response
		json.Unmarshal([]byte(h.HNSCall(ctx, "POST", "/endpoints/", c.doc)), &r)
		if r.Success || !strings.Contains(r.Error, c.field) {
			t.Errorf("v1 create %s: %+v, want an error naming %s", c.doc, r, c.field)
		}
	}
	if len(h.endpoints) != before {
		t.Errorf("%d endpoints after refused creates, want %d", len(h.endpoints), before)
	}
	wantHRESULT(t, h.ModifyNetwork(ctx, netID, `{"ResourceType":"DNS","RequestType":"Update","Settings":{"ServerList":["x"]}}`),
		computenetwork.HCN_E_INVALID_IP, "Settings.ServerList[0]")
}

func sameDns(a, b hcn.Dns) bool {
	return a.Domain == b.Domain && slices.Equal(a.Search, b.Search) && slices.Equal(a.ServerList, b.ServerList) && slices.Equal(a.Options, b.Options)
}

// TestResolvConf: the resolver file of a container (the emulator's convention, dns.go): every
// adapter's servers once, in adapter order; one search suffix, the first adapter's Domain or
// first Search (Windows applies one suffix); the document's DnsSearchList instead when it has
// one; ndots:1 whatever the endpoint's Options say; a comment line per adapter for ipconfig.
func TestResolvConf(t *testing.T) {
	pod := AdapterDNS{mac: "00-15-5D-0A-FA-00-05", dns: hcn.Dns{Search: []string{"default.svc.cluster.local", "svc.cluster.local"},
		ServerList: []string{"10.10.10.10", "10.10.10.11"}, Options: []string{"ndots:8"}}}
	second := AdapterDNS{mac: "00-15-5D-0A-FA-00-06", dns: hcn.Dns{Domain: "corp.example", ServerList: []string{"10.10.10.11", "10.0.0.53"}}}
	const head = "# C:\\etc\\resolv.conf: written by hcsemu (the emulator's convention) from the DNS settings\n" +
		"# of the container's network adapters, which Windows keeps on the adapters. Windows applies\n" +
		"# one DNS suffix and takes a name with a dot as fully qualified: hence one search suffix and\n" +
		"# ndots:1 (internal/hcsemu/hns dns.go).\n"
	for _, c := range []struct {
		name     string
		adapters []AdapterDNS
		search   string
		want     string
	}{
		{"pod", []AdapterDNS{pod}, "", head +
			"# hcsemu-adapter 00-15-5D-0A-FA-00-05 suffix=default.svc.cluster.local servers=10.10.10.10,10.10.10.11\n" +
			"nameserver 10.10.10.10\nnameserver 10.10.10.11\nsearch default.svc.cluster.local\noptions ndots:1\n"},
		{"two adapters", []AdapterDNS{pod, second}, "", head +
			"# hcsemu-adapter 00-15-5D-0A-FA-00-05 suffix=default.svc.cluster.local servers=10.10.10.10,10.10.10.11\n" +
			"# hcsemu-adapter 00-15-5D-0A-FA-00-06 suffix=corp.example servers=10.10.10.11,10.0.0.53\n" +
			"nameserver 10.10.10.10\nnameserver 10.10.10.11\nnameserver 10.0.0.53\nsearch default.svc.cluster.local\noptions ndots:1\n"},
		{"the document's DnsSearchList", []AdapterDNS{pod}, "a.example,b.example", head +
			"# hcsemu-adapter 00-15-5D-0A-FA-00-05 suffix=default.svc.cluster.local servers=10.10.10.10,10.10.10.11\n" +
			"nameserver 10.10.10.10\nnameserver 10.10.10.11\nsearch a.example b.example\noptions ndots:1\n"},
		{"no DNS settings", []AdapterDNS{{mac: "00-15-5D-0A-FA-00-07"}}, "", head +
			"# hcsemu-adapter 00-15-5D-0A-FA-00-07 suffix= servers=\noptions ndots:1\n"},
	} {
		if got := ResolvConf(c.adapters, c.search); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// TestNamespaceDNS: a namespace's adapters are its endpoints in the order they joined it.
func TestNamespaceDNS(t *testing.T) {
	h := newService(newFakeDataplane(), build2022)
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("dns-ns", "10.254.8.0/24", "10.254.8.1"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.CreateEndpoint(ctx, netID, "", `{"MacAddress":"00-15-5D-00-00-0A","Dns":{"ServerList":["10.10.10.10"]}}`)
	b, _ := h.CreateEndpoint(ctx, netID, "", `{"MacAddress":"00-15-5D-00-00-0B","Dns":{"Search":["google.com"]}}`)
	ns, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{b, a} {
		if err := h.ModifyNamespace(ctx, ns, `{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":"`+ep+`"}}`); err != nil {
			t.Fatal(err)
		}
	}
	got := h.NamespaceDNS(ns)
	if len(got) != 2 || got[0].mac != "00-15-5D-00-00-0B" || got[0].suffix() != "google.com" || got[1].mac != "00-15-5D-00-00-0A" || !slices.Equal(got[1].dns.ServerList, []string{"10.10.10.10"}) {
		t.Errorf("namespaceDNS: %+v", got)
	}
	if got := h.NamespaceDNS("no-such-namespace"); got != nil {
		t.Errorf("an unknown namespace's adapters: %+v", got)
	}
}
