package hns

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The HNS v1 surface: vmcompute.dll's HNSCall(method, path, request), as hcsshim's hns package
// and CNI plugins in their default (v1) mode use it. Each call is translated to the v2 objects
// above, so both surfaces see the same networks, endpoints and namespaces. The answer is
// always a Response document; a failure is Success false with the error text (the HRESULT of
// the call itself stays S_OK, as hcsshim's hnsCall expects: it reads Success).

// hnsVersion is what GET /globals/version reports. Assumption: 13.2, a Windows Server 2022
// level on hcsshim's version table (hcn/hcnglobals.go: V2 API from 9.2, IPv6 dual stack from
// 11.10, SetPolicy from 13.0), so that callers use the v2 API; not measured on a real host.
var hnsVersion = hcn.Version{Major: 13, Minor: 2}

// HNSCall serves one v1 call.
func (h *Service) HNSCall(ctx context.Context, method, path, request string) string {
	out, err := h.hnsCall(ctx, strings.ToUpper(method), path, request)
	if err != nil {
		e := hresult.As(err)
		b, _ := json.Marshal(hcn.Response{Success: false, Error: e.Message})
		return string(b)
	}
	r := hcn.Response{Success: true}
	if out != nil {
		b, err := json.Marshal(out)
		if err != nil {
			b, _ = json.Marshal(hcn.Response{Success: false, Error: err.Error()})
			return string(b)
		}
		r.Output = b
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func (h *Service) hnsCall(ctx context.Context, method, path, request string) (any, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	kind, id, sub := parts[0], "", ""
	if len(parts) > 1 {
		id = parts[1]
	}
	if len(parts) > 2 {
		sub = strings.Join(parts[2:], "/")
	}
	bad := func() (any, error) {
		return nil, hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "%s %s: not supported by the emulator", method, path)
	}
	switch kind {
	case "globals":
		if method == "GET" && id == "version" && sub == "" {
			return hnsVersion, nil
		}
	case "networks":
		switch {
		case method == "GET" && id == "":
			out := []hcn.HNSNetwork{}
			for _, n := range h.listNetworks() {
				out = append(out, v1Network(n))
			}
			return out, nil
		case method == "GET" && sub == "":
			n, err := h.getNetwork(id)
			if err != nil {
				return nil, err
			}
			return v1Network(n), nil
		case method == "POST" && id == "":
			var v1 hcn.HNSNetwork
			if err := hcnDecode(request, &v1, "HNSNetwork"); err != nil {
				return nil, err
			}
			doc, err := v2Network(&v1)
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(doc)
			nid, err := h.CreateNetwork(ctx, "", string(b))
			if err != nil {
				return nil, err
			}
			n, err := h.getNetwork(nid)
			if err != nil {
				return nil, err
			}
			return v1Network(n), nil
		case method == "DELETE" && id != "" && sub == "":
			return nil, h.DeleteNetwork(ctx, id)
		}
	case "endpoints":
		switch {
		case method == "GET" && id == "":
			return h.v1Endpoints(), nil
		case method == "GET" && sub == "":
			return h.v1EndpointByID(id)
		case method == "POST" && id == "":
			var v1 hcn.HNSEndpoint
			if err := hcnDecode(request, &v1, "HNSEndpoint"); err != nil {
				return nil, err
			}
			netID, doc, err := h.v2Endpoint(&v1)
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(doc)
			eid, err := h.CreateEndpoint(ctx, netID, "", string(b))
			if err != nil {
				return nil, err
			}
			return h.v1EndpointByID(eid)
		case method == "DELETE" && id != "" && sub == "":
			return nil, h.DeleteEndpoint(ctx, id)
		}
	case "policylists":
		// Load balancers in v1 form; kube-proxy's start-up check lists them
		// (winkernel/supported.go). Creating or deleting them through v1 is not emulated.
		if method == "GET" && id == "" {
			return h.v1PolicyLists(), nil
		}
	case "endpointstats":
		if method == "GET" && id != "" && sub == "" {
			return h.endpointStats(id)
		}
	case "namespaces":
		switch {
		case method == "POST" && id == "":
			var req struct {
				IsDefault bool `json:",omitempty"`
			}
			if err := decodeOptionalHCN(request, &req, "namespace request"); err != nil {
				return nil, err
			}
			typ := hcn.NamespaceHost
			if req.IsDefault {
				typ = hcn.NamespaceHostDefault
			}
			b, _ := json.Marshal(hcn.HostComputeNamespace{Type: typ, SchemaVersion: hcn.V2})
			nid, err := h.CreateNamespace(ctx, "", string(b))
			if err != nil {
				return nil, err
			}
			return h.v1Namespace(nid)
		case method == "GET" && id != "" && sub == "":
			return h.v1Namespace(id)
		case method == "DELETE" && id != "" && sub == "":
			return nil, h.DeleteNamespace(ctx, id)
		case method == "POST" && (sub == "addresource" || sub == "removeresource"):
			var r hcn.V1NamespaceResourceRequest
			if err := hcnDecode(request, &r, "namespace resource"); err != nil {
				return nil, err
			}
			if r.Type != hcn.ResourceEndpoint {
				return nil, hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "Type: %q: only Endpoint resources are added by callers", r.Type)
			}
			var d hcn.V1NamespaceEndpointData
			if err := hcnDecode(string(r.Data), &d, "Data"); err != nil {
				return nil, err
			}
			rt := hcn.RequestAdd
			if sub == "removeresource" {
				rt = hcn.RequestRemove
			}
			settings, _ := json.Marshal(hcn.NamespaceEndpointRequest{EndpointId: d.ID})
			req, _ := json.Marshal(hcn.ModifyNamespaceSettingRequest{ResourceType: hcn.ResourceEndpoint, RequestType: rt, Settings: settings})
			if err := h.ModifyNamespace(ctx, id, string(req)); err != nil {
				return nil, err
			}
			return h.v1Namespace(id)
		}
	}
	return bad()
}

func (h *Service) listNetworks() []*hnsNetwork {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*hnsNetwork
	for _, id := range sortedKeys(h.networks) {
		n := *h.networks[id]
		out = append(out, &n)
	}
	return out
}

func (h *Service) getNetwork(id string) (*hnsNetwork, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.network(id)
	if err != nil {
		return nil, err
	}
	c := *n
	return &c, nil
}

// v1Endpoints is every endpoint as a v1 document.
func (h *Service) v1Endpoints() []hcn.HNSEndpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []hcn.HNSEndpoint{}
	for _, ep := range h.sortedEndpoints() {
		out = append(out, v1EndpointLocked(ep))
	}
	return out
}

func (h *Service) v1EndpointByID(id string) (hcn.HNSEndpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return hcn.HNSEndpoint{}, err
	}
	return v1EndpointLocked(ep), nil
}

// endpointStats answers GET /endpointstats/<id>: the endpoint's counters from the dataplane,
// whether it is in a namespace or a utility VM's NIC (both are a veth pair whose host end the
// dataplane reads); an endpoint never attached has carried nothing: zeros.
func (h *Service) endpointStats(id string) (hcn.EndpointStats, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return hcn.EndpointStats{}, err
	}
	st, err := h.dp.counters(ep)
	if err != nil {
		return hcn.EndpointStats{}, hcnErrorf(computenetwork.E_FAIL, "statistics of endpoint %s: %v", id, err)
	}
	st.EndpointID, st.InstanceID = ep.doc.Id, ep.doc.Id
	return st, nil
}

func (h *Service) v1Namespace(id string) (hcn.V1Namespace, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(id)
	if err != nil {
		return hcn.V1Namespace{}, err
	}
	out := hcn.V1Namespace{ID: ns.doc.Id, IsDefault: ns.doc.Type == hcn.NamespaceHostDefault, CompartmentId: ns.doc.NamespaceId}
	for _, ep := range ns.endpoints {
		b, _ := json.Marshal(hcn.V1NamespaceEndpointData{ID: ep.doc.Id})
		out.ResourceList = append(out.ResourceList, hcn.V1NamespaceResource{Type: hcn.ResourceEndpoint, Data: b})
	}
	return out, nil
}

func v1Network(n *hnsNetwork) hcn.HNSNetwork {
	out := hcn.HNSNetwork{Id: n.doc.Id, Name: n.doc.Name, Type: n.doc.Type}
	for _, ipam := range n.doc.Ipams {
		for _, sn := range ipam.Subnets {
			s := hcn.V1Subnet{AddressPrefix: sn.IpAddressPrefix}
			for _, r := range sn.Routes {
				if r.DestinationPrefix == "0.0.0.0/0" {
					s.GatewayAddress = r.NextHop
				}
			}
			out.Subnets = append(out.Subnets, s)
		}
	}
	return out
}

func v2Network(v1 *hcn.HNSNetwork) (*hcn.HostComputeNetwork, error) {
	doc := &hcn.HostComputeNetwork{Id: v1.Id, Name: v1.Name, Type: v1.Type, SchemaVersion: hcn.V2}
	if len(v1.Subnets) > 0 {
		ipam := hcn.Ipam{Type: "Static"}
		for i, s := range v1.Subnets {
			if s.GatewayAddress == "" {
				return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "Subnets[%d].GatewayAddress: missing", i)
			}
			ipam.Subnets = append(ipam.Subnets, hcn.Subnet{
				IpAddressPrefix: s.AddressPrefix,
				Routes:          []hcn.Route{{NextHop: s.GatewayAddress, DestinationPrefix: "0.0.0.0/0"}},
			})
		}
		doc.Ipams = []hcn.Ipam{ipam}
	}
	return doc, nil
}

// v1EndpointLocked is an endpoint's v1 document (under h.mu). SharedContainers lists the
// compute systems the endpoint is attached to: those running in its namespace. hcsshim reads it
// to tell whether an endpoint is attached to a container (HNSEndpoint.IsAttached, which
// HotAttachEndpoint and HotDetachEndpoint ask first). Assumption: every container of the
// namespace counts, whether it joined the namespace at create (Networking.Namespace) or the
// endpoint was hot-added to it (HCS v1 Network modify); the endpoint is in that container's
// compartment either way.
func v1EndpointLocked(ep *hnsEndpoint) hcn.HNSEndpoint {
	out := hcn.HNSEndpoint{
		Id: ep.doc.Id, Name: ep.doc.Name, VirtualNetwork: ep.doc.HostComputeNetwork, VirtualNetworkName: ep.network.doc.Name,
		MacAddress: ep.doc.MacAddress, IPAddress: net.IP(ep.ip.AsSlice()), PrefixLength: uint8(ep.prefix),
		GatewayAddress: ep.network.gateway.String(), IsRemoteEndpoint: ep.remote(),
		// v1 carries the v2 Dns as comma-separated lists: DNSSuffix is the search list
		// (win-bridge reads it back as DNS.Search, pkg/hns endpoint_windows.go).
		DNSServerList: strings.Join(ep.doc.Dns.ServerList, ","), DNSSuffix: strings.Join(ep.doc.Dns.Search, ","),
		DNSDomain: ep.doc.Dns.Domain,
	}
	if ep.doc.HostComputeNamespace != "" {
		out.Namespace = &hcn.V1Namespace{ID: ep.doc.HostComputeNamespace}
	}
	if ep.namespace != nil {
		out.SharedContainers = slices.Clone(ep.namespace.containers)
	}
	for _, p := range ep.doc.Policies {
		switch p.Type {
		case hcn.PortMapping:
			var s hcn.PortMappingPolicySetting
			json.Unmarshal(p.Settings, &s)
			proto := "TCP"
			if s.Protocol == 17 {
				proto = "UDP"
			}
			b, _ := json.Marshal(hcn.V1NatPolicy{Type: "NAT", Protocol: proto, InternalPort: s.InternalPort, ExternalPort: s.ExternalPort})
			out.Policies = append(out.Policies, b)
		case hcn.OutBoundNAT:
			var s hcn.OutboundNatPolicySetting
			json.Unmarshal(p.Settings, &s)
			b, _ := json.Marshal(struct {
				Type          string   `json:"Type"`
				ExceptionList []string `json:"ExceptionList,omitempty"`
			}{"OutBoundNAT", s.Exceptions})
			out.Policies = append(out.Policies, b)
		}
	}
	return out
}

// v2Endpoint translates a v1 endpoint: its network by id (VirtualNetwork) or name
// (VirtualNetworkName), its address, gateway and v1 policies (NAT, OutBoundNAT; the others
// that win-bridge sends, ROUTE and ACL, are accepted without effect).
func (h *Service) v2Endpoint(v1 *hcn.HNSEndpoint) (string, *hcn.HostComputeEndpoint, error) {
	netID := v1.VirtualNetwork
	if netID == "" {
		if v1.VirtualNetworkName == "" {
			return "", nil, hcnErrorf(computenetwork.HCN_E_NETWORK_NOT_FOUND, "VirtualNetwork: missing (and no VirtualNetworkName)")
		}
		for _, n := range h.listNetworks() {
			if strings.EqualFold(n.doc.Name, v1.VirtualNetworkName) {
				netID = n.doc.Id
				break
			}
		}
		if netID == "" {
			return "", nil, hcnErrorf(computenetwork.HCN_E_NETWORK_NOT_FOUND, "VirtualNetworkName: no network named %q", v1.VirtualNetworkName)
		}
	}
	doc := &hcn.HostComputeEndpoint{Id: v1.Id, Name: v1.Name, MacAddress: v1.MacAddress, SchemaVersion: hcn.V2,
		// win-bridge's v1 mode joins the pod's servers and searches with commas
		// (containernetworking/plugins pkg/hns endpoint_windows.go GenerateHnsEndpoint).
		Dns: hcn.Dns{Domain: v1.DNSDomain, Search: splitList(v1.DNSSuffix), ServerList: splitList(v1.DNSServerList)}}
	// The same checks as v2's Dns (dns.go validateDNS), naming v1's fields.
	for _, srv := range doc.Dns.ServerList {
		if _, err := netip.ParseAddr(srv); err != nil {
			return "", nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "DNSServerList: %q: %q is not an IP address", v1.DNSServerList, srv)
		}
	}
	for _, sfx := range doc.Dns.Search {
		if err := checkSuffix("DNSSuffix", sfx); err != nil {
			return "", nil, err
		}
	}
	if v1.DNSDomain != "" {
		if err := checkSuffix("DNSDomain", v1.DNSDomain); err != nil {
			return "", nil, err
		}
	}
	if v1.IsRemoteEndpoint {
		doc.Flags = 1
	}
	if v1.IPAddress != nil {
		doc.IpConfigurations = []hcn.IpConfig{{IpAddress: v1.IPAddress.String(), PrefixLength: v1.PrefixLength}}
	}
	if v1.GatewayAddress != "" {
		if _, err := netip.ParseAddr(v1.GatewayAddress); err != nil {
			return "", nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "GatewayAddress: %q: %v", v1.GatewayAddress, err)
		}
		doc.Routes = []hcn.Route{{DestinationPrefix: "0.0.0.0/0", NextHop: v1.GatewayAddress}}
	}
	for i, raw := range v1.Policies {
		var head hcn.V1Policy
		if err := json.Unmarshal(raw, &head); err != nil {
			return "", nil, hcnErrorf(computenetwork.HCN_E_INVALID_JSON, "Policies[%d]: %v", i, err)
		}
		switch head.Type {
		case "NAT":
			var p hcn.V1NatPolicy
			if err := hcnDecode(string(raw), &p, fmt.Sprintf("Policies[%d]", i)); err != nil {
				return "", nil, err
			}
			proto := uint32(6)
			switch strings.ToUpper(p.Protocol) {
			case "", "TCP":
			case "UDP":
				proto = 17
			default:
				return "", nil, hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "Policies[%d].Protocol: %q is not TCP or UDP", i, p.Protocol)
			}
			s, _ := json.Marshal(hcn.PortMappingPolicySetting{Protocol: proto, InternalPort: p.InternalPort, ExternalPort: p.ExternalPort})
			doc.Policies = append(doc.Policies, hcn.EndpointPolicy{Type: hcn.PortMapping, Settings: s})
		case "OutBoundNAT":
			var p struct {
				Type             string   `json:"Type"`
				VIP              string   `json:"VIP,omitempty"`
				ExceptionList    []string `json:"ExceptionList,omitempty"`
				Destinations     []string `json:",omitempty"`
				MaxPortPoolUsage uint16   `json:",omitempty"`
			}
			if err := hcnDecode(string(raw), &p, fmt.Sprintf("Policies[%d]", i)); err != nil {
				return "", nil, err
			}
			s, _ := json.Marshal(hcn.OutboundNatPolicySetting{VirtualIP: p.VIP, Exceptions: p.ExceptionList, Destinations: p.Destinations})
			doc.Policies = append(doc.Policies, hcn.EndpointPolicy{Type: hcn.OutBoundNAT, Settings: s})
		case "ROUTE", "ACL", "QOS", "L2Driver", "PA", "VLAN", "VSID", "VNET", "Isolation", "ELB", "PROXY":
			// Known v1 policies; accepted without effect.
		default:
			return "", nil, hcnErrorf(computenetwork.HCN_E_INVALID_POLICY_TYPE, "Policies[%d].Type: %q is not an endpoint policy type", i, head.Type)
		}
	}
	return netID, doc, nil
}
