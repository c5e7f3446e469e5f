package uvm

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The network of a Hyper-V pod, as hcsshim gives it to the pod's utility VM
// (internal/uvm/network.go SetupNetworkNamespace, AddNetNS, AddEndpointsToNS, addNIC,
// RemoveNetNS): the pod's HNS namespace (spec.windows.network.networkNamespace, which CRI made
// and a CNI plugin filled) is added to the guest (a NetworkNamespace guest request carrying the
// namespace's HNS document), and each of its endpoints becomes a NIC of the VM, the one whose
// name ends in "eth0" first: a guest-only PreAdd of the endpoint, then the host Add at
// VirtualMachine/Devices/NetworkAdapters/<nic id> ({EndpointId, MacAddress}) with its guest Add.
// The containers hosted in the VM name the namespace in Container.Networking.Namespace and need
// nothing else. Removal is the reverse: each NIC (guest and host Remove in one request, which
// HCS orders guest first), then the namespace.
//
// hcsshim's removeNIC sends the guest part of a NIC's Remove without a ResourceType (a
// ModifySettingRequest where a GuestModifySettingRequest belongs, since microsoft/hcsshim#257);
// this package names it, "Network", as the Add does.
//
// A network is reference counted by namespace id; Terminate removes what is left before the VM
// stops, as hcsshim's pod sandbox tears down networking before closing its VM.

// HNS is what a VM needs of the Host Network Service to network it (an *hns.Client).
type HNS interface {
	GetNamespace(ctx context.Context, id string) (*hcn.HostComputeNamespace, error)
	GetEndpoint(ctx context.Context, id string) (*hcn.HostComputeEndpoint, error)
}

// network is an HNS namespace added to the VM, and the NICs of its endpoints, in order.
type network struct {
	ns   *hcn.HostComputeNamespace
	nics []nic
}

type nic struct {
	id       string
	endpoint *hcn.HostComputeEndpoint
}

// AddNetwork adds the HNS namespace nsID to the VM with its endpoints as NICs, or takes another
// reference to it. On failure nothing of it is left in the VM.
func (vm *VM) AddNetwork(ctx context.Context, h HNS, nsID string) error {
	_, err := vm.networks.acquire(strings.ToLower(nsID), func() (*network, error) {
		return vm.addNetwork(ctx, h, nsID)
	})
	return err
}

// RemoveNetwork drops a reference to the namespace nsID; the last one removes its NICs and the
// namespace from the VM.
func (vm *VM) RemoveNetwork(ctx context.Context, nsID string) error {
	_, err := vm.networks.release(strings.ToLower(nsID), func(n *network) error { return vm.removeNetwork(ctx, n) })
	return err
}

// removeNetworks removes every network from the VM, whatever its references: the VM stops.
func (vm *VM) removeNetworks(ctx context.Context) error {
	var errs []error
	for _, id := range vm.networks.keys() {
		for {
			held, err := vm.networks.release(id, func(n *network) error { return vm.removeNetwork(ctx, n) })
			if err != nil {
				errs = append(errs, err)
				break
			}
			if !held {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (vm *VM) addNetwork(ctx context.Context, h HNS, nsID string) (_ *network, retErr error) {
	ns, err := h.GetNamespace(ctx, nsID)
	if err != nil {
		return nil, fmt.Errorf("windows.network.networkNamespace=%q: %w", nsID, err)
	}
	ids, _ := hns.NamespaceResources(ns)
	endpoints := make([]*hcn.HostComputeEndpoint, 0, len(ids))
	for _, id := range ids {
		ep, err := h.GetEndpoint(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s of HNS namespace %s: %w", id, nsID, err)
		}
		endpoints = append(endpoints, ep)
	}
	// hcsshim's sortEndpoints: the endpoint named …eth0 becomes the guest's first adapter.
	slices.SortStableFunc(endpoints, func(a, b *hcn.HostComputeEndpoint) int {
		ae, be := strings.HasSuffix(a.Name, "eth0"), strings.HasSuffix(b.Name, "eth0")
		switch {
		case ae && !be:
			return -1
		case be && !ae:
			return 1
		}
		return 0
	})
	if err := vm.add(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeNetworkNamespace, RequestType: schema2.RequestTypeAdd, Settings: ns,
	}}); err != nil {
		return nil, fmt.Errorf("add HNS namespace %s to the guest: %w", nsID, err)
	}
	n := &network{ns: ns}
	defer func() {
		if retErr != nil {
			if err := vm.removeNetwork(context.WithoutCancel(ctx), n); err != nil {
				log.G(ctx).WithError(err).WithFields(log.Fields{"system": vm.id, "namespace": nsID}).Error("undo a failed network add")
			}
		}
	}()
	for _, ep := range endpoints {
		id := nicID(vm.id, ep.Id)
		if err := vm.addNIC(ctx, id, ep); err != nil {
			return nil, err
		}
		n.nics = append(n.nics, nic{id: id, endpoint: ep})
	}
	log.G(ctx).WithFields(log.Fields{"system": vm.id, "namespace": nsID, "nics": len(n.nics)}).Info("pod network added to the utility VM")
	return n, nil
}

// addNIC is hcsshim's addNIC for a Windows guest: PreAdd in the guest, then the host Add with
// the guest Add. A failed host Add takes the PreAdd back.
func (vm *VM) addNIC(ctx context.Context, id string, ep *hcn.HostComputeEndpoint) error {
	if err := vm.add(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeNetwork, RequestType: schema2.RequestTypeAdd,
		Settings: &schema2.NetworkModifyRequest{AdapterId: id, RequestType: schema2.NetworkRequestPreAdd, Settings: ep},
	}}); err != nil {
		return fmt.Errorf("pre-add NIC %s (endpoint %s) in the guest: %w", id, ep.Id, err)
	}
	if err := vm.add(ctx, nicRequest(schema2.RequestTypeAdd, id, ep)); err != nil {
		if rerr := vm.remove(context.WithoutCancel(ctx), &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
			ResourceType: schema2.ResourceTypeNetwork, RequestType: schema2.RequestTypeRemove,
			Settings: &schema2.NetworkModifyRequest{AdapterId: id, RequestType: schema2.RequestTypeRemove},
		}}); rerr != nil {
			log.G(ctx).WithError(rerr).WithField("nic", id).Error("take back the NIC's pre-add")
		}
		return fmt.Errorf("add NIC %s (endpoint %s): %w", id, ep.Id, err)
	}
	return nil
}

func nicRequest(rt schema2.RequestType, id string, ep *hcn.HostComputeEndpoint) *schema2.ModifySettingRequest {
	return &schema2.ModifySettingRequest{
		ResourcePath: fmt.Sprintf(schema2.ResourcePathNetworkAdapterFormat, id),
		RequestType:  rt,
		Settings:     schema2.NetworkAdapter{EndpointId: ep.Id, MacAddress: ep.MacAddress},
		GuestRequest: &schema2.GuestModifySettingRequest{
			ResourceType: schema2.ResourceTypeNetwork, RequestType: rt,
			Settings: &schema2.NetworkModifyRequest{AdapterId: id, RequestType: rt},
		},
	}
}

// removeNetwork removes a network's NICs, last first, then its namespace from the guest. A NIC
// that fails to go stays listed, so that a retry removes it.
func (vm *VM) removeNetwork(ctx context.Context, n *network) error {
	for len(n.nics) > 0 {
		last := n.nics[len(n.nics)-1]
		if err := vm.remove(ctx, nicRequest(schema2.RequestTypeRemove, last.id, last.endpoint)); err != nil {
			return fmt.Errorf("remove NIC %s (endpoint %s): %w", last.id, last.endpoint.Id, err)
		}
		n.nics = n.nics[:len(n.nics)-1]
	}
	if err := vm.remove(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeNetworkNamespace, RequestType: schema2.RequestTypeRemove, Settings: n.ns,
	}}); err != nil {
		return fmt.Errorf("remove HNS namespace %s from the guest: %w", n.ns.Id, err)
	}
	return nil
}

// nicID names the NIC of endpoint ep in VM vm: a GUID (version 5 layout) derived from both, so
// the same endpoint gets the same id in the same VM. hcsshim draws a random GUID; HCS needs only
// an id unique in the VM, and a derived one keeps requests reproducible.
func nicID(vm, ep string) string {
	sum := sha1.Sum([]byte(vm + "/" + strings.ToLower(ep)))
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}
