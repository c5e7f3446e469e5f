package hns

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// HNS endpoints as NICs of utility VMs (HcsModifyComputeSystem at
// VirtualMachine/Devices/NetworkAdapters/<nic id>, vm_network_linux.go). On Windows HNS turns the
// endpoint's port on the vSwitch into the VM's synthetic NIC: the endpoint keeps its address,
// MAC and routes, which the guest applies in its network compartment, and stays an HNS object
// (in its HNS namespace, if it is in one). Here the endpoint's container-side link is moved
// from its HNS namespace's netns (or made, if it is in none) into the VM's network namespace,
// with the same address, MAC and routes; removing the NIC (or the VM stopping) moves it back.
//
// The lock order is system → hns: the VM's lock is held when these are called.

// endpointNIC says an endpoint is a NIC of a utility VM: which VM, under which NIC id, and the
// VM's network namespace its link is in.
type endpointNIC struct {
	vm, nic string
	netns   string
}

// attachVMNIC makes endpoint epID the NIC nicID of VM vm, whose network namespace is the file
// netns; index orders the routes of the VM's NICs. mac, when given, must be the endpoint's
// (hcsshim sends the endpoint's own, internal/uvm/network.go addNIC). Errors name the
// request's fields (Settings.EndpointId, Settings.MacAddress); on failure the endpoint is as it
// was.
func (h *Service) AttachVMNIC(ctx context.Context, field, vm, nic, netns, epID, mac string, index int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return err
	}
	ep, err := h.endpoint(epID)
	if err != nil {
		e := hresult.As(err)
		return &hresult.Error{HResult: e.HResult, Message: field + ".EndpointId: " + e.Message}
	}
	switch {
	case ep.remote():
		return hcnErrorf(computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "%s.EndpointId: endpoint %s is a remote endpoint", field, ep.doc.Id)
	case ep.nic != nil:
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "%s.EndpointId: endpoint %s is already NIC %q of VM %q", field, ep.doc.Id, ep.nic.nic, ep.nic.vm)
	case ep.namespace != nil && len(ep.namespace.containers) > 0:
		// Assumption: HNS does not hand a VM an endpoint that containers of its namespace use
		// (its vNIC is their network); the code is HNS's for an endpoint attached elsewhere.
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "%s.EndpointId: endpoint %s is in use by compute systems %q of namespace %s",
			field, ep.doc.Id, ep.namespace.containers, ep.namespace.doc.Id)
	}
	if mac != "" {
		m, err := net.ParseMAC(mac)
		if err != nil || len(m) != 6 {
			return hcnErrorf(computenetwork.E_INVALIDARG, "%s.MacAddress: %q is not a MAC address (00-15-5D-01-02-03)", field, mac)
		}
		// Assumption: HCS refuses a NIC whose MAC differs from its endpoint's, whose MAC HNS
		// has programmed on the vSwitch port.
		if !slices.Equal(m, ep.mac) {
			return hcnErrorf(computenetwork.E_INVALIDARG, "%s.MacAddress: %q is not the MAC address of endpoint %s (%s)", field, mac, ep.doc.Id, ep.doc.MacAddress)
		}
	}
	home := ep.namespace
	if home != nil {
		if err := h.dp.detach(ep); err != nil {
			return hcnErrorf(computenetwork.E_FAIL, "%s.EndpointId: take endpoint %s out of namespace %s: %v", field, ep.doc.Id, home.doc.Id, err)
		}
	}
	if err := h.dp.attach(ep, &hnsNamespace{doc: hcn.HostComputeNamespace{Id: vm}, path: netns}, index); err != nil {
		err = hcnErrorf(computenetwork.E_FAIL, "%s.EndpointId: plug endpoint %s into VM %q: %v", field, ep.doc.Id, vm, err)
		if home != nil {
			if rerr := h.dp.attach(ep, home, slices.Index(home.endpoints, ep)); rerr != nil {
				log.G(ctx).WithError(rerr).WithField("endpoint", ep.doc.Id).Error("hcsemu: could not put the endpoint back in its namespace")
			}
		}
		return err
	}
	ep.nic = &endpointNIC{vm: vm, nic: nic, netns: netns}
	log.G(ctx).WithFields(log.Fields{"endpoint": ep.doc.Id, "system": vm, "nic": nic}).Info("hcsemu: HNS endpoint plugged into a utility VM")
	return nil
}

// detachVMNIC unplugs NIC nic of VM vm, endpoint epID: its link goes back to the endpoint's HNS
// namespace, or away if it is in none. An endpoint deleted meanwhile (its link went with it) or
// no longer that NIC is fine: the NIC is gone either way.
func (h *Service) DetachVMNIC(ctx context.Context, vm, nic, epID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(epID)
	if err != nil || ep.nic == nil || ep.nic.vm != vm || !strings.EqualFold(ep.nic.nic, nic) {
		return
	}
	if err := h.dp.detach(ep); err != nil {
		log.G(ctx).WithError(err).WithField("endpoint", ep.doc.Id).Warn("hcsemu: removing the endpoint's link from the VM failed")
	}
	ep.nic = nil
	if ns := ep.namespace; ns != nil {
		if err := h.dp.attach(ep, ns, slices.Index(ns.endpoints, ep)); err != nil {
			log.G(ctx).WithError(err).WithFields(log.Fields{"endpoint": ep.doc.Id, "namespace": ns.doc.Id}).Warn("hcsemu: the endpoint could not return to its namespace")
		}
	}
	log.G(ctx).WithFields(log.Fields{"endpoint": ep.doc.Id, "system": vm, "nic": nic}).Info("hcsemu: HNS endpoint unplugged from a utility VM")
}
