package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

func v1NetworkRequest(request, endpoint string) string {
	return fmt.Sprintf(`{"ResourceType":"Network","RequestType":%q,"Settings":%q}`, request, endpoint)
}

// hrOf is err's HRESULT, S_OK for nil.
func hrOf(err error) computecore.HRESULT {
	if err == nil {
		return 0
	}
	return hresult.As(err).HResult
}

// TestV1NetworkModify checks HCS v1's Network modify request, hcsshim's HotAttachEndpoint and
// HotDetachEndpoint: an endpoint hot-added to a running container that names an HNS namespace
// joins that namespace (a server the container already runs is reached at the endpoint's
// address from the emulated host), v1 HNS lists the container among the endpoint's
// SharedContainers, Remove takes it out again; bad requests are refused naming the field,
// changing nothing.
func TestV1NetworkModify(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()

	netID, err := h.CreateNetwork(ctx, "", networkDoc("v1-net", "10.253.1.0/24", "10.253.1.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"IpConfigurations":[{"IpAddress":"10.253.1.5"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	nsID, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := createSystem(t, api, "v1-pod", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, nsID), true)
	p := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe listen 0.0.0.0:7000`, CreateStdOutPipe: true})
	if line, err := bufio.NewReader(p.stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("server: %q, %v", line, err)
	}
	// modifyOn returns the call's error with the HCS result document, which holds the message.
	modifyOn := func(sys computecore.System, doc string) error {
		result, err := run(t, api, func(op computecore.Operation) error { return api.ModifyComputeSystem(sys, op, doc, 0) })
		if err != nil {
			return fmt.Errorf("%w: %s", err, result)
		}
		return nil
	}
	modify := func(doc string) error { return modifyOn(cs, doc) }
	shared := func() []string {
		var resp struct {
			Success bool
			Output  hcn.HNSEndpoint
		}
		json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpoints/"+epID, "")), &resp)
		return resp.Output.SharedContainers
	}

	// Refused, naming the field, with nothing changed.
	otherNS, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	// A container without a namespace whose processes already run (in the daemon's network
	// namespace).
	bare, _ := createSystem(t, api, "v1-bare", "", true)
	mustStart(t, api, bare, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 300`})
	for _, c := range []struct {
		name string
		sys  computecore.System
		doc  string
		hr   computecore.HRESULT
		want string
	}{
		{"unknown endpoint", cs, v1NetworkRequest("Add", "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"), computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "Settings"},
		{"not a GUID", cs, v1NetworkRequest("Add", "pod-endpoint"), computecore.HRESULT(computenetwork.HCN_E_GUID_CONVERSION_FAILURE), "pod-endpoint"},
		{"settings not a string", cs, `{"ResourceType":"Network","RequestType":"Add","Settings":{"Id":"x"}}`, computecore.HCS_E_INVALID_JSON, "Settings"},
		{"bad request type", cs, fmt.Sprintf(`{"ResourceType":"Network","RequestType":"Update","Settings":%q}`, epID), computecore.E_INVALIDARG, "RequestType"},
		{"other resource", cs, `{"ResourceType":"MappedDirectory","RequestType":"Add","Settings":{}}`, computecore.E_NOTIMPL, "ResourceType"},
		{"unknown field", cs, fmt.Sprintf(`{"ResourceType":"Network","RequestType":"Add","Settings":%q,"Extra":1}`, epID), computecore.HCS_E_INVALID_JSON, "Extra"},
		{"both schemas", cs, fmt.Sprintf(`{"ResourceType":"Network","ResourcePath":"x","Settings":%q}`, epID), computecore.HCS_E_INVALID_JSON, "ResourceType"},
		{"remove what is not attached", cs, v1NetworkRequest("Remove", epID), computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "not attached"},
		{"running container without a namespace", bare, v1NetworkRequest("Add", epID), computecore.E_NOTIMPL, "Container.Networking.Namespace"},
		{"remove from a container without a namespace", bare, v1NetworkRequest("Remove", epID), computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "not attached"},
	} {
		err := modifyOn(c.sys, c.doc)
		if e := hresult.As(err); err == nil || e.HResult != c.hr || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %v naming %q", c.name, err, c.hr, c.want)
		}
	}
	if ep, _ := h.QueryEndpoint(ctx, epID, ""); strings.Contains(ep, "HostComputeNamespace") {
		t.Fatalf("a refused request attached the endpoint: %s", ep)
	}

	if err := modify(v1NetworkRequest("Add", epID)); err != nil {
		t.Fatal(err)
	}
	if got := shared(); !slices.Contains(got, "v1-pod") {
		t.Errorf("SharedContainers %v; want v1-pod", got)
	}
	if doc, _ := h.QueryNamespace(ctx, nsID, ""); !strings.Contains(doc, epID) {
		t.Errorf("the namespace does not hold the endpoint: %s", doc)
	}
	if err := modify(v1NetworkRequest("Add", epID)); hrOf(err) != computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS) || !strings.Contains(err.Error(), "Settings") {
		t.Errorf("a second add: %v; want HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS naming Settings", err)
	}
	// An endpoint in one namespace cannot join another container's.
	if _, err := h.CreateEndpoint(ctx, netID, "", `{}`); err != nil {
		t.Fatal(err)
	}
	other, _ := createSystem(t, api, "v1-other", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, otherNS), false)
	if err := modifyOn(other, v1NetworkRequest("Add", epID)); hrOf(err) != computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED) {
		t.Errorf("adding an endpoint of another container's namespace: %v; want HCN_E_ENDPOINT_ALREADY_ATTACHED", err)
	}

	// The running server is reached at the endpoint's address now: the endpoint joined the
	// namespace its processes run in.
	hostPath := hns.HostNetnsPath(d.engine.cfg.Root)
	var answer string
	err = hns.InNetns(hostPath, func() error {
		c, err := net.DialTimeout("tcp", "10.253.1.5:7000", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "ping\n")
		answer, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil || answer != "echo: ping\n" {
		t.Errorf("host → hot-added endpoint: %q, %v", answer, err)
	}

	if err := modify(v1NetworkRequest("Remove", epID)); err != nil {
		t.Fatal(err)
	}
	if got := shared(); len(got) != 0 {
		t.Errorf("after Remove, SharedContainers %v", got)
	}
	if doc, _ := h.QueryNamespace(ctx, nsID, ""); strings.Contains(doc, epID) {
		t.Errorf("after Remove, the namespace still holds the endpoint: %s", doc)
	}
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	if err := modify(v1NetworkRequest("Add", epID)); hrOf(err) != computecore.HCS_E_INVALID_STATE {
		t.Errorf("add to a stopped system: %v; want HCS_E_INVALID_STATE", err)
	}
}

// TestV1NetworkModifyWithoutNamespace checks the hot-add of an endpoint to a container that
// names no namespace and has not started a process: the emulator makes it a namespace holding
// the endpoint, which its processes then start in (a server is reached at the endpoint's
// address), and which goes with the container, the endpoint staying.
func TestV1NetworkModifyWithoutNamespace(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()

	netID, err := h.CreateNetwork(ctx, "", networkDoc("v1-fresh-net", "10.253.3.0/24", "10.253.3.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"IpConfigurations":[{"IpAddress":"10.253.3.5"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := createSystem(t, api, "v1-fresh", "", false)
	if result, err := run(t, api, func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, v1NetworkRequest("Add", epID), 0)
	}); err != nil {
		t.Fatalf("hot-add to a container that has not started a process: %v (%s)", err, result)
	}
	doc, err := h.EnumerateNamespaces(ctx, "")
	var ids []string
	if err != nil || json.Unmarshal([]byte(doc), &ids) != nil || len(ids) != 1 {
		t.Fatalf("namespaces: %s, %v; want the one made for the container", doc, err)
	}
	if ns, _ := h.QueryNamespace(ctx, ids[0], ""); !strings.Contains(ns, epID) || !strings.Contains(ns, `"v1-fresh"`) {
		t.Errorf("the container's namespace: %s; want the endpoint and the container", ns)
	}
	mustRun(t, api, "start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	p := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe listen 0.0.0.0:7000`, CreateStdOutPipe: true})
	if line, err := bufio.NewReader(p.stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("server: %q, %v", line, err)
	}
	var answer string
	err = hns.InNetns(hns.HostNetnsPath(d.engine.cfg.Root), func() error {
		c, err := net.DialTimeout("tcp", "10.253.3.5:7000", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "ping\n")
		answer, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil || answer != "echo: ping\n" {
		t.Errorf("host → the hot-added endpoint: %q, %v", answer, err)
	}
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	if doc, _ := h.EnumerateNamespaces(ctx, ""); doc != "[]" {
		t.Errorf("namespaces after the container stopped: %s; want none", doc)
	}
	if ep, err := h.QueryEndpoint(ctx, epID, ""); err != nil || strings.Contains(ep, "HostComputeNamespace") {
		t.Errorf("the endpoint after the container stopped: %s, %v; want it kept and detached", ep, err)
	}
}

// TestNetworkAdapters checks endpoints a container document lists without a namespace
// (Container.Networking.NetworkAdapters, the v1 EndpointList way): they join a namespace the
// emulator makes for the container (a server in it is reached at the endpoint's address from
// the emulated host), which goes with the container while the endpoints stay; an unknown
// endpoint, one already in a namespace, one listed twice, or adapters beside a namespace fail
// the create naming the field and leave no namespace.
func TestNetworkAdapters(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()

	netID, err := h.CreateNetwork(ctx, "", networkDoc("adapters-net", "10.253.2.0/24", "10.253.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"IpConfigurations":[{"IpAddress":"10.253.2.5"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := h.CreateEndpoint(ctx, netID, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	userNS, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ModifyNamespace(ctx, userNS, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, taken)); err != nil {
		t.Fatal(err)
	}
	namespaces := func() []string {
		doc, err := h.EnumerateNamespaces(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		json.Unmarshal([]byte(doc), &ids)
		return ids
	}

	for _, c := range []struct {
		name, extra string
		hr          computecore.HRESULT
		want        string
	}{
		{"unknown endpoint", `,"Networking":{"NetworkAdapters":["6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"]}`, computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "NetworkAdapters[0]"},
		{"endpoint in a namespace", fmt.Sprintf(`,"Networking":{"NetworkAdapters":[%q,%q]}`, epID, taken), computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED), "NetworkAdapters[1]"},
		{"listed twice", fmt.Sprintf(`,"Networking":{"NetworkAdapters":[%q,%q]}`, epID, epID), computecore.E_INVALIDARG, "NetworkAdapters[1]"},
		{"beside a namespace", fmt.Sprintf(`,"Networking":{"Namespace":%q,"NetworkAdapters":[%q]}`, userNS, epID), computecore.E_INVALIDARG, "NetworkAdapters"},
	} {
		vol := newVolume(t)
		op, _ := api.CreateOperation(0, nil)
		cs, err := api.CreateComputeSystem("adapters-bad", containerConfig(vol, c.extra), op, 0)
		var doc string
		if err == nil {
			doc, err = api.WaitForOperationResult(op, opTimeout)
			api.CloseComputeSystem(cs)
		}
		api.CloseOperation(op)
		if hrOf(err) != c.hr || !strings.Contains(doc+errString(err), c.want) {
			t.Errorf("%s: %v (%s); want %v naming %s", c.name, err, doc, c.hr, c.want)
		}
		if got := namespaces(); len(got) != 1 || got[0] != userNS {
			t.Errorf("%s: namespaces after the refused create: %v; want only %s", c.name, got, userNS)
		}
	}
	if ep, _ := h.QueryEndpoint(ctx, epID, ""); strings.Contains(ep, "HostComputeNamespace") {
		t.Fatalf("a refused create left the endpoint in a namespace: %s", ep)
	}

	cs, _ := createSystem(t, api, "adapters-pod", fmt.Sprintf(`,"Networking":{"NetworkAdapters":[%q]}`, epID), true)
	var own string
	for _, id := range namespaces() {
		if id != userNS {
			own = id
		}
	}
	if doc, _ := h.QueryNamespace(ctx, own, ""); own == "" || !strings.Contains(doc, epID) || !strings.Contains(doc, `"adapters-pod"`) {
		t.Fatalf("the container's namespace %q: %s; want it to hold the endpoint and the container", own, doc)
	}
	p := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe listen 0.0.0.0:7000`, CreateStdOutPipe: true})
	if line, err := bufio.NewReader(p.stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("server: %q, %v", line, err)
	}
	var answer string
	err = hns.InNetns(hns.HostNetnsPath(d.engine.cfg.Root), func() error {
		c, err := net.DialTimeout("tcp", "10.253.2.5:7000", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "ping\n")
		answer, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil || answer != "echo: ping\n" {
		t.Errorf("host → the listed endpoint: %q, %v", answer, err)
	}

	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	if got := namespaces(); len(got) != 1 || got[0] != userNS {
		t.Errorf("namespaces after the container stopped: %v; want only %s", got, userNS)
	}
	if ep, err := h.QueryEndpoint(ctx, epID, ""); err != nil || strings.Contains(ep, "HostComputeNamespace") {
		t.Errorf("the endpoint after the container stopped: %s, %v; want it kept and detached", ep, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
