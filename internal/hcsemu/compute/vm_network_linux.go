package compute

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The network of a utility VM. A VM is a separate network stack: it has a network namespace of
// its own, <root>/netns/vm-<runtime id>, made with the VM and removed with it, in which its
// init, its own processes and every container hosted in it run (so the containers of a pod
// share localhost, as they share the guest's compartment on Windows). It has loopback only
// until NICs are added:
//
//   - host side, VirtualMachine/Devices/NetworkAdapters/<nic id> Add / Remove with a
//     NetworkAdapter {EndpointId, MacAddress} (hcsshim internal/uvm/network.go addNIC; also
//     in the create document's Devices.NetworkAdapters): the HNS endpoint's link moves into the
//     VM's namespace with its address, MAC and routes (internal/hcsemu/hns vmnic.go) and back on Remove; the
//     endpoint stays an HNS object. When the VM stops (shutdown, terminate, crash), its NICs are
//     unplugged the same way and its namespace removed.
//   - guest side (GuestRequest, the HCS-mediated path; hcsshim's SetupNetworkNamespace,
//     AddNetNS, addNIC): NetworkNamespace Add / Remove with the HNS namespace's document
//     (hcn.HostComputeNamespace) makes the guest know that namespace: it is the compartment
//     of the VM's network namespace, and a hosted container whose Container.Networking.Namespace
//     names it runs there. Network with a NetworkModifyRequest {AdapterId, RequestType, Settings}:
//     PreAdd (Settings: the HNS endpoint, a guest-only request before the host Add), Add (with
//     the host Add of the same adapter) and Remove.
//
// Assumptions (Microsoft documents none of this): a VM that stops loses its NICs while their
// endpoints stay (HNS endpoints are deleted by whoever made them: a CNI plugin's DEL, hcsshim's
// NetworkEndpoints.Release; after a VM exit hcsshim still removes NICs and tolerates their
// absence, internal/uvm/network.go RemoveNetNS, hcsshim#2743), and an endpoint whose NIC goes
// returns to its HNS namespace as it was; the emulated guest has one network
// compartment, so a second NetworkNamespace with another id is E_NOTIMPL; a guest Add of an
// adapter without its PreAdd, or whose PreAdd named another endpoint, is ERROR_NOT_FOUND /
// E_INVALIDARG; removing the namespace while NICs remain is ERROR_BUSY; a hosted container
// that names a namespace the guest does not have fails with ERROR_NOT_FOUND, one that names
// none also runs in the VM's namespace (the guest's default compartment).

const nicPathPrefix = "VirtualMachine/Devices/NetworkAdapters/"

// vmNetwork is the network part of a VM (vmState.net), guarded by the VM's lock.
type vmNetwork struct {
	path    string            // the VM's network namespace file
	nics    map[string]*vmNIC // by lower-cased NIC id
	guestNS string            // the HNS namespace the guest was given (NetworkNamespace), "" if none
	preAdd  map[string]string // guest PreAdds: lower-cased adapter id → endpoint id
	inGuest map[string]bool   // adapters added in the guest (lower-cased id)
}

type vmNIC struct {
	id       string
	endpoint string
}

// vmNetnsPath is where a VM's network namespace is bound.
func (s *system) vmNetnsPath() string {
	return layout.VMNetns(s.e.cfg.Root, s.runtimeID())
}

// setupVMNetworkLocked makes the VM's network namespace and plugs the NICs of its document. On
// failure nothing is left.
func (s *system) setupVMNetworkLocked(ctx context.Context, adapters map[string]schema2.NetworkAdapter) error {
	p := s.vmNetnsPath()
	if err := hns.NewNetnsFile(p); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "VM %q: its network namespace: %v", s.id, err)
	}
	n := &vmNetwork{path: p, nics: map[string]*vmNIC{}, preAdd: map[string]string{}, inGuest: map[string]bool{}}
	s.vm.net = n
	fail := func(err error) error {
		s.releaseVMNetworkLocked(ctx)
		return err
	}
	if err := hns.SetLoopbackUp(p); err != nil {
		return fail(hresult.Errorf(computecore.E_FAIL, "VM %q: loopback of its network namespace: %v", s.id, err))
	}
	f, err := os.Open(p)
	if err != nil {
		return fail(hresult.Errorf(computecore.E_FAIL, "VM %q: %v", s.id, err))
	}
	s.netns = f
	for _, id := range slices.Sorted(maps.Keys(adapters)) {
		field := "VirtualMachine.Devices.NetworkAdapters." + id
		if err := s.plugNICLocked(ctx, field, id, adapters[id]); err != nil {
			return fail(err)
		}
	}
	return nil
}

// plugNICLocked adds NIC id of endpoint a.EndpointId to the VM.
func (s *system) plugNICLocked(ctx context.Context, field, id string, a schema2.NetworkAdapter) error {
	n := s.vm.net
	key := strings.ToLower(id)
	if cur, dup := n.nics[key]; dup {
		return hresult.Errorf(errAlreadyExists, "%s: VM %q already has NIC %q (endpoint %s)", field, s.id, id, cur.endpoint)
	}
	if a.EndpointId == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.EndpointId: missing required field", field)
	}
	if err := s.e.net.AttachVMNIC(ctx, field, s.id, id, n.path, a.EndpointId, a.MacAddress, len(n.nics)); err != nil {
		return err
	}
	n.nics[key] = &vmNIC{id: id, endpoint: a.EndpointId}
	return nil
}

// unplugNICLocked removes NIC key (lower-cased) from the VM.
func (s *system) unplugNICLocked(ctx context.Context, key string) {
	n := s.vm.net
	nic := n.nics[key]
	if nic == nil {
		return
	}
	s.e.net.DetachVMNIC(ctx, s.id, nic.id, nic.endpoint)
	delete(n.nics, key)
	delete(n.inGuest, key)
}

// releaseVMNetworkLocked unplugs every NIC and removes the VM's network namespace: the VM has
// stopped (or its create failed). The endpoints stay HNS objects, back in their namespaces.
func (s *system) releaseVMNetworkLocked(ctx context.Context) {
	n := s.vm.net
	if n == nil {
		return
	}
	for _, key := range slices.Sorted(maps.Keys(n.nics)) {
		s.unplugNICLocked(ctx, key)
	}
	n.guestNS = ""
	clear(n.preAdd)
	if err := hns.RemoveNetnsFile(n.path); err != nil {
		log.G(ctx).WithError(err).WithField("system", s.id).Warn("hcsemu: removing the VM's network namespace failed")
	}
	s.vm.net = nil
}

// modifyNICLocked is the host part of a modify at VirtualMachine/Devices/NetworkAdapters/<id>.
func (s *system) modifyNICLocked(ctx context.Context, req *schema2.ModifySettingRequest, settings []byte) (*hostChange, error) {
	n := s.vm.net
	id := req.ResourcePath[len(nicPathPrefix):]
	if id == "" || strings.Contains(id, "/") {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q is not %s<nic id>", req.ResourcePath, nicPathPrefix)
	}
	if err := wantRequestType(req, schema2.RequestTypeAdd, schema2.RequestTypeRemove, schema2.RequestTypeUpdate); err != nil {
		return nil, err
	}
	key := strings.ToLower(id)
	cur := n.nics[key]
	var a schema2.NetworkAdapter
	if req.RequestType != schema2.RequestTypeRemove || (settings != nil && string(settings) != "null") {
		if err := decodeSettings(settings, &a); err != nil {
			return nil, err
		}
	}
	switch req.RequestType {
	case schema2.RequestTypeAdd:
		if cur != nil {
			return nil, hresult.Errorf(errAlreadyExists, "ResourcePath: %q: VM %q already has NIC %q (endpoint %s)", req.ResourcePath, s.id, id, cur.endpoint)
		}
		if a.EndpointId == "" {
			return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings.EndpointId: missing required field")
		}
		return &hostChange{
			apply: func() error { return s.plugNICLocked(ctx, "Settings", id, a) },
			undo:  func() { s.unplugNICLocked(ctx, key) },
		}, nil
	case schema2.RequestTypeUpdate:
		// hcsshim's UpdateNIC changes IovSettings, which the emulator does not model; the
		// endpoint of a NIC cannot change.
		if cur == nil {
			return nil, hresult.Errorf(errAbsent, "ResourcePath: %q: VM %q has no such NIC", req.ResourcePath, s.id)
		}
		if a.EndpointId != "" && !strings.EqualFold(a.EndpointId, cur.endpoint) {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings.EndpointId: %q: the endpoint of NIC %q cannot change (it is %s)", a.EndpointId, id, cur.endpoint)
		}
		return &hostChange{apply: func() error { return nil }}, nil
	}
	if cur == nil {
		return nil, hresult.Errorf(errAbsent, "ResourcePath: %q: VM %q has no such NIC", req.ResourcePath, s.id)
	}
	if a.EndpointId != "" && !strings.EqualFold(a.EndpointId, cur.endpoint) {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings.EndpointId: %q is not the endpoint of NIC %q (%s)", a.EndpointId, id, cur.endpoint)
	}
	return &hostChange{apply: func() error { s.unplugNICLocked(ctx, key); return nil }}, nil
}

// guestNamespaceLocked serves the NetworkNamespace guest request.
func (s *system) guestNamespaceLocked(rt schema2.RequestType, doc *hcn.HostComputeNamespace) error {
	n := s.vm.net
	const f = "GuestRequest.Settings"
	if doc.Id == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.ID: missing required field", f)
	}
	id, err := hns.CanonicalGUID(f+".ID", doc.Id)
	if err != nil {
		return err
	}
	if rt == schema2.RequestTypeRemove {
		if n.guestNS != id {
			return hresult.Errorf(errAbsent, "%s.ID: %s: the guest of VM %q has no such network namespace", f, doc.Id, s.id)
		}
		if len(n.nics) > 0 {
			return hresult.Errorf(errShareInUse, "%s.ID: %s: VM %q still has %d NICs in it; remove them first", f, doc.Id, s.id, len(n.nics))
		}
		n.guestNS = ""
		return nil
	}
	switch n.guestNS {
	case "":
	case id:
		return hresult.Errorf(errAlreadyExists, "%s.ID: %s: the guest of VM %q has it already", f, doc.Id, s.id)
	default:
		return hresult.Errorf(computecore.E_NOTIMPL, "%s.ID: %s: the emulated guest of VM %q has one network namespace, %s", f, doc.Id, s.id, n.guestNS)
	}
	n.guestNS = id
	return nil
}

// networkModifyRequest is schema2.NetworkModifyRequest as the guest decodes it (RS4 guests took
// AdapterInstanceId instead, which the emulated guest, of RS5 or later, does not).
type networkModifyRequest struct {
	AdapterId   string              `json:"AdapterId,omitempty"`
	RequestType schema2.RequestType `json:"RequestType,omitempty"`
	Settings    json.RawMessage     `json:"Settings,omitempty"`
}

// guestNICLocked serves the Network guest request.
func (s *system) guestNICLocked(rt schema2.RequestType, r *networkModifyRequest) error {
	n := s.vm.net
	const f = "GuestRequest.Settings"
	if r.AdapterId == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.AdapterId: missing required field", f)
	}
	key := strings.ToLower(r.AdapterId)
	switch {
	case rt == schema2.RequestTypeAdd && r.RequestType == schema2.NetworkRequestPreAdd:
		var ep hcn.HostComputeEndpoint
		if err := hresult.Decode(string(r.Settings), &ep, f+".Settings"); err != nil {
			return err
		}
		if ep.Id == "" {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Settings.ID: missing required field", f)
		}
		if n.guestNS == "" {
			return hresult.Errorf(errAbsent, "%s.Settings: the guest of VM %q has no network namespace for endpoint %s (NetworkNamespace first)", f, s.id, ep.Id)
		}
		if ep.HostComputeNamespace != "" {
			if ns, err := hns.CanonicalGUID(f+".Settings.HostComputeNamespace", ep.HostComputeNamespace); err != nil {
				return err
			} else if ns != n.guestNS {
				return hresult.Errorf(errAbsent, "%s.Settings.HostComputeNamespace: %s is not the guest's network namespace %s", f, ep.HostComputeNamespace, n.guestNS)
			}
		}
		if _, dup := n.preAdd[key]; dup || n.inGuest[key] {
			return hresult.Errorf(errAlreadyExists, "%s.AdapterId: %q was already added in the guest of VM %q", f, r.AdapterId, s.id)
		}
		n.preAdd[key] = ep.Id
		return nil
	case rt == schema2.RequestTypeAdd && r.RequestType == schema2.RequestTypeAdd:
		ep, ok := n.preAdd[key]
		nic := n.nics[key]
		switch {
		case !ok:
			return hresult.Errorf(errAbsent, "%s.AdapterId: %q: no PreAdd of that adapter in the guest of VM %q", f, r.AdapterId, s.id)
		case nic == nil:
			return hresult.Errorf(errAbsent, "%s.AdapterId: %q: VM %q has no such NIC (%s%s)", f, r.AdapterId, s.id, nicPathPrefix, r.AdapterId)
		case !strings.EqualFold(ep, nic.endpoint):
			return hresult.Errorf(computecore.E_INVALIDARG, "%s.AdapterId: %q: its PreAdd named endpoint %s, the NIC is endpoint %s", f, r.AdapterId, ep, nic.endpoint)
		}
		delete(n.preAdd, key)
		n.inGuest[key] = true
		return nil
	case rt == schema2.RequestTypeRemove && r.RequestType == schema2.RequestTypeRemove:
		if _, ok := n.preAdd[key]; ok {
			delete(n.preAdd, key)
			return nil
		}
		if !n.inGuest[key] {
			return hresult.Errorf(errAbsent, "%s.AdapterId: %q is not an adapter of the guest of VM %q", f, r.AdapterId, s.id)
		}
		delete(n.inGuest, key)
		return nil
	}
	return hresult.Errorf(computecore.E_INVALIDARG, "%s.RequestType: %q in a GuestRequest %s: want PreAdd or Add under Add, Remove under Remove", f, r.RequestType, rt)
}

// hostedNetwork is where a container hosted in the VM runs: the VM's network namespace.
// A Container.Networking.Namespace must be the one the guest was given (hcsshim names the pod's
// namespace in every hosted container's document, internal/hcsoci/hcsdoc_wcow.go); the
// container does not join that HNS namespace on the host (c's Networking is a copy the
// caller may change).
func (vm *vmState) hostedNetwork(vmID string, c *schema2.Container) (string, error) {
	n := vm.net
	if n == nil {
		return "", hresult.Errorf(computecore.HCS_E_INVALID_STATE, "HostingSystemId: VM %q has no network (stopped)", vmID)
	}
	if c.Networking != nil && c.Networking.Namespace != "" {
		const field = "HostedSystem.Container.Networking.Namespace"
		id, err := hns.CanonicalGUID(field, c.Networking.Namespace)
		if err != nil {
			return "", err
		}
		if id != n.guestNS {
			return "", hresult.Errorf(computecore.HRESULT(computenetwork.E_ELEMENT_NOT_FOUND), "%s: %q is not a network namespace of VM %q's guest (NetworkNamespace guest request)", field, c.Networking.Namespace, vmID)
		}
		net := *c.Networking
		net.Namespace = ""
		c.Networking = &net
	}
	return n.path, nil
}

// guestNetworkLocked decodes and serves the two network guest requests (for guestModifyLocked);
// it reports whether g was one of them.
func (s *system) guestNetworkLocked(g *schema2.GuestModifySettingRequest, decode func(any) error) (bool, error) {
	switch g.ResourceType {
	case schema2.ResourceTypeNetworkNamespace:
		var ns hcn.HostComputeNamespace
		if err := decode(&ns); err != nil {
			return true, err
		}
		return true, s.guestNamespaceLocked(g.RequestType, &ns)
	case schema2.ResourceTypeNetwork:
		var r networkModifyRequest
		if err := decode(&r); err != nil {
			return true, err
		}
		return true, s.guestNICLocked(g.RequestType, &r)
	}
	return false, nil
}
