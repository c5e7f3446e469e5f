package hns

import (
	"context"
	"fmt"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
)

// TestHNSVMNIC: an endpoint as a VM's NIC, on the fake dataplane: the refusals name the field
// and change nothing, and unplugging puts the endpoint back where it was.
func TestHNSVMNIC(t *testing.T) {
	ctx := context.Background()
	dp := newFakeDataplane()
	h := newService(dp, build2022)
	netID, err := h.CreateNetwork(ctx, "", networkDoc("n", "10.0.0.0/24", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := h.CreateEndpoint(ctx, netID, "", `{}`)
	busy, _ := h.CreateEndpoint(ctx, netID, "", `{}`)
	remote, _ := h.CreateEndpoint(ctx, netID, "", `{"Flags":1,"IpConfigurations":[{"IpAddress":"10.0.0.200"}]}`)
	ns, _ := h.CreateNamespace(ctx, "", `{}`)
	busyNS, _ := h.CreateNamespace(ctx, "", `{}`)
	for id, in := range map[string]string{ep: ns, busy: busyNS} {
		if err := h.ModifyNamespace(ctx, in, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.JoinContainer(busyNS, "process-isolated"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, ep, mac string
		hr            computenetwork.HRESULT
		field         string
	}{
		{"unknown", "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11", "", computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "Settings.EndpointId"},
		{"remote", remote, "", computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "Settings.EndpointId"},
		{"used by containers", busy, "", computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "Settings.EndpointId"},
		{"bad mac", ep, "xx", computenetwork.E_INVALIDARG, "Settings.MacAddress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantHRESULT(t, h.AttachVMNIC(ctx, "Settings", "vm", "nic", "/netns/vm", tc.ep, tc.mac, 0), tc.hr, tc.field)
		})
	}
	dp.fail = "attach"
	if err := h.AttachVMNIC(ctx, "Settings", "vm", "nic", "/netns/vm", ep, "", 0); err == nil {
		t.Fatal("a failing dataplane plugged the NIC")
	}
	if e := h.endpoints[ep]; e.nic != nil || e.namespace == nil || !dp.attached[ep] {
		t.Fatalf("after a failed plug the endpoint is not back in its namespace: nic %v, namespace %v, attached %v", e.nic, e.namespace, dp.attached[ep])
	}

	if err := h.AttachVMNIC(ctx, "Settings", "vm", "nic", "/netns/vm", ep, "", 0); err != nil {
		t.Fatal(err)
	}
	wantHRESULT(t, h.AttachVMNIC(ctx, "Settings", "vm2", "nic", "/netns/vm2", ep, "", 0), computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "Settings.EndpointId")
	// A NIC cannot join an HNS namespace (it is the VM's), and leaving its namespace keeps it
	// in the VM.
	wantHRESULT(t, h.ModifyNamespace(ctx, busyNS, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, ep)),
		computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "Settings.EndpointId")
	if err := h.ModifyNamespace(ctx, ns, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Remove","Settings":{"EndpointId":%q}}`, ep)); err != nil {
		t.Fatal(err)
	}
	if !dp.attached[ep] || h.endpoints[ep].nic == nil {
		t.Fatal("leaving its HNS namespace unplugged the VM's NIC")
	}
	// Another VM's or another NIC id's unplug does nothing; the VM's own removes the link, and
	// with no namespace left the endpoint is attached nowhere.
	h.DetachVMNIC(ctx, "vm2", "nic", ep)
	h.DetachVMNIC(ctx, "vm", "other", ep)
	if h.endpoints[ep].nic == nil {
		t.Fatal("an unplug of another NIC unplugged this one")
	}
	h.DetachVMNIC(ctx, "vm", "NIC", ep)
	if e := h.endpoints[ep]; e.nic != nil || dp.attached[ep] {
		t.Fatalf("after unplug: nic %v, attached %v", e.nic, dp.attached[ep])
	}
	// A deleted endpoint's NIC goes with it; the unplug that follows is a no-op.
	if err := h.AttachVMNIC(ctx, "Settings", "vm", "nic", "/netns/vm", ep, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if dp.attached[ep] {
		t.Fatal("a deleted endpoint's link is left in the VM")
	}
	h.DetachVMNIC(ctx, "vm", "nic", ep)
}
