package uvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// fakeHNS serves namespaces and endpoints as HNS documents.
type fakeHNS struct {
	namespaces map[string]*hcn.HostComputeNamespace
	endpoints  map[string]*hcn.HostComputeEndpoint
}

func (f *fakeHNS) GetNamespace(_ context.Context, id string) (*hcn.HostComputeNamespace, error) {
	if ns, ok := f.namespaces[id]; ok {
		return ns, nil
	}
	return nil, fmt.Errorf("namespace %s: %w", id, errdefs.ErrNotFound)
}

func (f *fakeHNS) GetEndpoint(_ context.Context, id string) (*hcn.HostComputeEndpoint, error) {
	if ep, ok := f.endpoints[id]; ok {
		return ep, nil
	}
	return nil, fmt.Errorf("endpoint %s: %w", id, errdefs.ErrNotFound)
}

const (
	podNS  = "9a1bd0c4-54ac-4e6b-8e4b-0c2a6b0e1f01"
	epEth1 = "3c5e2a10-0000-4000-8000-000000000001"
	epEth0 = "3c5e2a10-0000-4000-8000-000000000002"
)

// newFakeHNS is a pod namespace with two endpoints, the CNI's eth0 listed second.
func newFakeHNS() *fakeHNS {
	res := func(id string) hcn.NamespaceResource {
		b, _ := json.Marshal(hcn.NamespaceResourceData{Id: id})
		return hcn.NamespaceResource{Type: hcn.ResourceEndpoint, Data: b}
	}
	return &fakeHNS{
		namespaces: map[string]*hcn.HostComputeNamespace{podNS: {Id: podNS, NamespaceId: 3, Type: hcn.NamespaceHost,
			Resources: []hcn.NamespaceResource{res(epEth1), res(epEth0)}, SchemaVersion: hcn.V2}},
		endpoints: map[string]*hcn.HostComputeEndpoint{
			epEth1: {Id: epEth1, Name: "pod_eth1", HostComputeNamespace: podNS, MacAddress: "00-15-5D-0A-00-08",
				IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.0.8", PrefixLength: 24}}, SchemaVersion: hcn.V2},
			epEth0: {Id: epEth0, Name: "pod_eth0", HostComputeNamespace: podNS, MacAddress: "00-15-5D-0A-00-07",
				IpConfigurations: []hcn.IpConfig{{IpAddress: "10.0.0.7", PrefixLength: 24}}, SchemaVersion: hcn.V2},
		},
	}
}

// TestNetwork: the pod's namespace goes into the guest, each endpoint becomes a NIC (eth0 first)
// through hcsshim's PreAdd / Add sequence, references are counted, and everything goes in reverse
// order when released and before the VM stops. The requests are golden documents.
func TestNetwork(t *testing.T) {
	ctx := context.Background()
	vm, sys := startVM(t)
	h := newFakeHNS()
	if err := vm.AddNetwork(ctx, h, podNS); err != nil {
		t.Fatal(err)
	}
	if err := vm.AddNetwork(ctx, h, podNS); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "network-add.json"), []byte("["+strings.Join(sys.reqs, ",\n")+"]\n"))
	if n := len(sys.reqs); n != 5 {
		t.Fatalf("%d requests for one namespace with two endpoints added twice, want 5 (namespace, PreAdd+Add each)", n)
	}
	added := len(sys.reqs)
	if err := vm.RemoveNetwork(ctx, podNS); err != nil {
		t.Fatal(err)
	}
	if len(sys.reqs) != added {
		t.Errorf("releasing one of two references sent %q", sys.reqs[added:])
	}
	if err := vm.RemoveNetwork(ctx, podNS); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "network-remove.json"), []byte("["+strings.Join(sys.reqs[added:], ",\n")+"]\n"))

	// A failing NIC add leaves nothing: the first NIC and the namespace are taken back.
	sys.reqs, sys.log = nil, nil
	failing := 0
	sys.failHook = func(line string) error {
		if line == "Add guest Network" {
			failing++
			if failing == 4 { // the second NIC's host Add
				return errors.New("injected")
			}
		}
		return nil
	}
	if err := vm.AddNetwork(ctx, h, podNS); err == nil {
		t.Fatal("AddNetwork with a failing NIC succeeded")
	}
	wantLog := []string{
		"Add guest NetworkNamespace",
		"Add guest Network",    // PreAdd eth0
		"Add guest Network",    // Add eth0
		"Add guest Network",    // PreAdd eth1
		"Remove guest Network", // the PreAdd taken back
		"Remove guest Network", // eth0's NIC
		"Remove guest NetworkNamespace",
	}
	if got := sys.calls(); strings.Join(got, "\n") != strings.Join(wantLog, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
	sys.failHook = nil
	if err := vm.AddNetwork(ctx, h, "00000000-0000-0000-0000-00000000dead"); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "networkNamespace") {
		t.Errorf("AddNetwork of an unknown namespace: %v", err)
	}

	// Terminate removes what is left before the VM stops.
	if err := vm.AddNetwork(ctx, h, podNS); err != nil {
		t.Fatal(err)
	}
	sys.log = nil
	if err := vm.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sys.calls(); len(got) != 3 || got[2] != "Remove guest NetworkNamespace" {
		t.Errorf("Terminate with a network: %q, want two NIC removals and the namespace's", got)
	}
}
