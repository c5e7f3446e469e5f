package hns

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// HNS: the emulator's Host Network Service. It keeps networks, endpoints and namespaces with
// the HCN v2 documents (internal/hns/hcn), validates them before anything is made, and asks a
// dataplane (dataplane_linux.go: Linux network namespaces, bridges, veth pairs and nftables rules
// in a network namespace that plays the Windows host) to make them real. One lock guards the
// objects and is held across dataplane calls: they are local kernel calls of a few
// milliseconds, and holding it keeps the objects and the kernel in step. The lock order is
// system → hns: a compute system joins a namespace with its own lock held, and nothing here
// takes a system's lock.
//
// Persist or clean: the emulator cleans. HNS on Windows keeps networks (not endpoints or
// namespaces of dead containers) across a service restart, but this daemon's compute systems
// die with it (Pdeathsig), and a namespace or endpoint left behind would describe containers
// that no longer exist; a network kept would have to be re-made in a host namespace that died
// with the daemon. So HNS state lives as long as the daemon, as HCS state does (docs/emulator.md,
// "The contract"): Close removes it, and a daemon starting on a root a dead one left
// removes whatever Linux state that one left (dataplane_linux.go).

// hnsDataplane makes the objects real. Every method leaves nothing behind when it fails.
type hnsDataplane interface {
	addNetwork(n *hnsNetwork) error
	delNetwork(n *hnsNetwork) error
	addNamespace(ns *hnsNamespace) error
	delNamespace(ns *hnsNamespace) error
	attach(ep *hnsEndpoint, ns *hnsNamespace, index int) error
	detach(ep *hnsEndpoint) error
	// setRules replaces the NAT rules (port mappings, outbound NAT, load balancers) with those
	// of the given networks, endpoints and load balancers' rules (lbRulesLocked; remote are the
	// remote endpoints' addresses the load balancers forward to).
	setRules(networks []*hnsNetwork, endpoints []*hnsEndpoint, lbs []lbRule, remote []netip.Addr) error
	// netnsPath is the file of a namespace's Linux network namespace, for processes to join.
	netnsPath(ns *hnsNamespace) string
	// counters are an endpoint's traffic counters, seen from the endpoint (what its container
	// or VM received and sent); zeros while it is attached nowhere.
	counters(ep *hnsEndpoint) (hcn.EndpointStats, error)
	close() error
}

// hnsNetwork is one network; subnet and gateway come from its first IPv4 subnet.
type hnsNetwork struct {
	doc     hcn.HostComputeNetwork
	subnet  netip.Prefix
	gateway netip.Addr
	link    string // the dataplane's bridge
}

type portMapping struct {
	proto    uint32 // 6 or 17
	external uint16
	internal uint16
	vip      netip.Addr // invalid: any host address
	// fromHost is what the emulated host's own programs reach of the mapping (hostReachOf);
	// other endpoints and the outside reach it at the host's addresses whatever it is.
	fromHost hostReach
}

// hostReach says which destinations of the Windows host's own programs a port mapping
// answers at: its external port on the host's addresses, on 127.0.0.1 too, or on none.
type hostReach uint8

const (
	// reachNone: the host's own connections to its mapped ports are dropped by its TCP/IP
	// stack; only other machines and the containers reach them.
	reachNone hostReach = iota
	// reachAddresses: the host's own addresses (the VIP, or any) at the external port.
	reachAddresses
	// reachLoopback: the host's addresses and 127.0.0.1 (localhost).
	reachLoopback
)

// natFlagsLocalRoutedVip and natFlagsIPv6 are a PortMapping policy's Flags (hcsshim's
// hcn.NatFlags: NatFlagsNone 0, NatFlagsLocalRoutedVip 1, NatFlagsIPv6 2).
const (
	natFlagsLocalRoutedVip = 1
	natFlagsIPv6           = 2
)

// Windows builds the host reaching its own port mappings depends on.
const (
	// build1809 is Windows Server 2019 (1809), whose WinNAT maps the host's own connections,
	// localhost's among them.
	build1809 = 17763
	// build2022 is Windows Server 2022, the first build with the fix that makes a
	// LocalRoutedVip port mapping reach the vSwitch from the host.
	build2022 = 20348
)

// hostReachOf is what a Windows host of the given build reaches of its own port mapping with
// flags on a network of netType, as the sources say:
//
//   - NAT networks map ports with WinNAT. Up to Windows Server 2016 the NAT host cannot reach
//     its own static port mappings at all, not at its addresses nor at localhost ("Internal
//     endpoints assigned to VMs or containers cannot be accessed using the external IPs /
//     ports referenced in NAT static port mappings directly from the NAT host", Microsoft,
//     "Windows NAT (WinNAT) -- Capabilities and limitations", 2016-05-25;
//     MicrosoftDocs/Virtualization-Documentation#253). From Windows Server 2019 (1809) published
//     ports are reachable on localhost (E. Stoneman, "Published ports on Windows containers
//     don't do loopback", updated: "From Windows 1809 onwards this is no longer an issue";
//     S. Scherer in docker/docs#8353), and containerd's own Windows CI GETs
//     http://127.0.0.1:<hostPort> (cri-tools pkg/validate/networking.go checkMainPage) on
//     Windows Server 2022 hosts whose CNI plugin is Microsoft's nat, without skipping it
//     (containerd .github/workflows/ci.yml, integration-windows; script/setup/install-cni-windows).
//   - Every other network type (L2Bridge here) maps ports with VFP policies in the vSwitch.
//     The host's own connections to its addresses at a mapped port never reach the vSwitch
//     ("traffic will never reach container networking stack but instead be dropped by TCP/IP
//     stack") unless the policy carries the LocalRoutedVip flag, which makes the OS add a
//     route for it to the vSwitch (Microsoft's D. Schott, Azure/azure-container-networking#1863,
//     and microsoft/Windows-Containers#360: "Important to add flags = 1"), and that needs an
//     OS fix made for Windows Server 2022 only ("The fix in Windows OS will only be done in
//     WS2022", Azure/AKS#3620). win-bridge sets no flags (containernetworking/plugins
//     pkg/hns/netconf_windows.go ApplyPortMappingPolicy); Microsoft's sdnbridge sets it with
//     its optionalFlags.localRoutedPortMapping.
//     Assumption (no source says either way): 127.0.0.1 is not mapped even then: the route is
//     for the VIP (the host's address), and loopback traffic never leaves the host's stack.
//     Later builds than 2022 are assumed to keep the fix.
func hostReachOf(netType string, flags uint32, build uint32) hostReach {
	if netType == hcn.NAT {
		if build >= build1809 {
			return reachLoopback
		}
		return reachNone
	}
	if flags&natFlagsLocalRoutedVip != 0 && build >= build2022 {
		return reachAddresses
	}
	return reachNone
}

// hnsEndpoint is one endpoint.
type hnsEndpoint struct {
	doc     hcn.HostComputeEndpoint
	network *hnsNetwork
	ip      netip.Addr
	prefix  int
	mac     net.HardwareAddr
	routes  []hcn.Route
	ports   []portMapping
	// outboundNAT is set by an OutBoundNAT policy: traffic from the endpoint that leaves its
	// network is masqueraded, except to these prefixes.
	outboundNAT *[]netip.Prefix
	namespace   *hnsNamespace
	hostLink    string // the dataplane's host end of the veth pair, while attached
	// nic is set while the endpoint is a utility VM's NIC (vmnic.go): its link is in the
	// VM's network namespace, not in its HNS namespace's.
	nic *endpointNIC
}

func (ep *hnsEndpoint) remote() bool { return ep.doc.Flags&hcn.EndpointFlagsRemoteEndpoint != 0 }

// hnsNamespace is one namespace.
type hnsNamespace struct {
	doc        hcn.HostComputeNamespace
	endpoints  []*hnsEndpoint
	containers []string
	path       string // the dataplane's netns file
}

type Service struct {
	dp hnsDataplane
	// build is the emulated host's Windows build (--os-version), which decides what the
	// host's own programs reach of its port mappings (hostReachOf).
	build uint32

	mu              sync.Mutex
	closed          bool
	networks        map[string]*hnsNetwork
	endpoints       map[string]*hnsEndpoint
	namespaces      map[string]*hnsNamespace
	loadBalancers   map[string]*hnsLoadBalancer
	nextCompartment uint32
}

func newService(dp hnsDataplane, build uint32) *Service {
	return &Service{
		dp:            dp,
		build:         build,
		networks:      map[string]*hnsNetwork{},
		endpoints:     map[string]*hnsEndpoint{},
		namespaces:    map[string]*hnsNamespace{},
		loadBalancers: map[string]*hnsLoadBalancer{},
		// Compartment 1 is the host's default compartment on Windows.
		nextCompartment: 2,
	}
}

// HRESULT helpers: HCN codes are carried in the engine's computecore.HRESULT.
func hcnErrorf(hr computenetwork.HRESULT, format string, args ...any) *hresult.Error {
	return hresult.Errorf(computecore.HRESULT(hr), format, args...)
}

// canonicalGUID checks and normalises an id given as a string (documents, args).
func CanonicalGUID(field, s string) (string, error) {
	g, err := computenetwork.ParseGUID(s)
	if err != nil {
		return "", hcnErrorf(computenetwork.HCN_E_GUID_CONVERSION_FAILURE, "%s: %v", field, err)
	}
	return g.String(), nil
}

// pickID decides a new object's id: the call's id when not zero, else the document's, else a new
// one. Both given and different is an error.
func pickID(argID, docID string) (string, error) {
	var a, d string
	var err error
	if argID != "" {
		if a, err = CanonicalGUID("id", argID); err != nil {
			return "", err
		}
		if a == (computenetwork.GUID{}).String() {
			a = ""
		}
	}
	if docID != "" {
		if d, err = CanonicalGUID("ID", docID); err != nil {
			return "", err
		}
	}
	switch {
	case a != "" && d != "" && a != d:
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "ID: %q differs from the id %q the call passed", docID, argID)
	case a != "":
		return a, nil
	case d != "":
		return d, nil
	}
	return hresult.NewGUID(), nil
}

func checkSchemaVersion(v hcn.Version) error {
	if v != (hcn.Version{}) && v.Major != 2 {
		return hcnErrorf(computenetwork.E_INVALIDARG, "SchemaVersion: %d.%d is not supported (2.x is)", v.Major, v.Minor)
	}
	return nil
}

// hcnDecode decodes an HCN document strictly (as decodeDocument does HCS's), with HCN's
// HRESULT for bad JSON.
func hcnDecode(doc string, v any, what string) error {
	if err := hresult.Decode(doc, v, what); err != nil {
		e := hresult.As(err)
		if e.HResult == computecore.HCS_E_INVALID_JSON {
			e = hcnErrorf(computenetwork.HCN_E_INVALID_JSON, "%s", e.Message)
		}
		return e
	}
	return nil
}

func (h *Service) live() error {
	if h.closed {
		return hcnErrorf(computenetwork.HCN_E_MANAGER_STOPPED, "the HNS emulator is shutting down")
	}
	return nil
}

// ---- networks

func (h *Service) CreateNetwork(ctx context.Context, argID, settings string) (string, error) {
	var doc hcn.HostComputeNetwork
	if err := hcnDecode(settings, &doc, "HostComputeNetwork"); err != nil {
		return "", err
	}
	id, err := pickID(argID, doc.Id)
	if err != nil {
		return "", err
	}
	doc.Id = id
	n, err := validateNetwork(&doc)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return "", err
	}
	if _, ok := h.networks[id]; ok {
		return "", hcnErrorf(computenetwork.HCN_E_NETWORK_ALREADY_EXISTS, "ID: a network with id %q already exists", id)
	}
	for _, o := range h.networks {
		// Assumption: names are how CNI plugins and kube-proxy find a network (hcsshim's
		// GetNetworkByName returns the first match), so a second network of the same name is
		// refused to keep that lookup unambiguous.
		if doc.Name != "" && strings.EqualFold(o.doc.Name, doc.Name) {
			return "", hcnErrorf(computenetwork.HCN_E_NETWORK_ALREADY_EXISTS, "Name: a network named %q already exists (%s)", doc.Name, o.doc.Id)
		}
		if o.subnet.Overlaps(n.subnet) {
			return "", hcnErrorf(computenetwork.HCN_E_INVALID_IP, "Ipams[0].Subnets[0].IpAddressPrefix: %s overlaps network %q's %s", n.subnet, o.doc.Name, o.subnet)
		}
	}
	if err := h.dp.addNetwork(n); err != nil {
		return "", hcnErrorf(computenetwork.E_FAIL, "network %s: %v", id, err)
	}
	h.networks[id] = n
	if err := h.applyRulesLocked(); err != nil {
		delete(h.networks, id)
		h.dp.delNetwork(n)
		h.applyRulesLocked()
		return "", err
	}
	log.G(ctx).WithFields(log.Fields{"network": id, "name": doc.Name, "type": doc.Type, "subnet": n.subnet}).Info("hcsemu: HNS network created")
	return id, nil
}

func validateNetwork(doc *hcn.HostComputeNetwork) (*hnsNetwork, error) {
	if err := checkSchemaVersion(doc.SchemaVersion); err != nil {
		return nil, err
	}
	if doc.Type == "" {
		// HNS's NetworkMode 0 is NAT, and it omits it from documents (hcsshim's getNetwork).
		doc.Type = hcn.NAT
	}
	switch doc.Type {
	case hcn.NAT, hcn.L2Bridge:
	case hcn.Transparent, hcn.L2Tunnel, hcn.ICS, hcn.Private, hcn.Overlay:
		return nil, hcnErrorf(computenetwork.E_NOTIMPL, "Type: %q networks are not emulated (NAT and L2Bridge are)", doc.Type)
	default:
		return nil, hcnErrorf(computenetwork.HCN_E_INVALID_NETWORK_TYPE, "Type: %q is not a network type", doc.Type)
	}
	n := &hnsNetwork{}
	for i, ipam := range doc.Ipams {
		switch ipam.Type {
		case "", "Static", "DHCP":
		default:
			return nil, hcnErrorf(computenetwork.E_INVALIDARG, "Ipams[%d].Type: %q is not Static or DHCP", i, ipam.Type)
		}
		for j, sn := range ipam.Subnets {
			f := fmt.Sprintf("Ipams[%d].Subnets[%d]", i, j)
			p, err := netip.ParsePrefix(sn.IpAddressPrefix)
			if err != nil {
				return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.IpAddressPrefix: %q: %v", f, sn.IpAddressPrefix, err)
			}
			if !p.Addr().Is4() {
				return nil, hcnErrorf(computenetwork.E_NOTIMPL, "%s.IpAddressPrefix: %q: the emulator builds IPv4 subnets only", f, sn.IpAddressPrefix)
			}
			if p.Bits() > 30 {
				return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.IpAddressPrefix: %q leaves no room for a gateway and endpoints", f, sn.IpAddressPrefix)
			}
			p = p.Masked()
			var gw netip.Addr
			for k, r := range sn.Routes {
				rf := fmt.Sprintf("%s.Routes[%d]", f, k)
				if _, err := netip.ParsePrefix(r.DestinationPrefix); err != nil {
					return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.DestinationPrefix: %q: %v", rf, r.DestinationPrefix, err)
				}
				hop, err := netip.ParseAddr(r.NextHop)
				if err != nil {
					return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.NextHop: %q: %v", rf, r.NextHop, err)
				}
				if !p.Contains(hop) || hop == p.Addr() || hop == lastAddr(p) {
					return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.NextHop: %s is not a host address of the subnet %s", rf, hop, p)
				}
				if r.DestinationPrefix == "0.0.0.0/0" {
					gw = hop
				}
			}
			if !gw.IsValid() {
				// hcsshim refuses this before calling HNS ("no default gateway").
				return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.Routes: no default route (DestinationPrefix 0.0.0.0/0 with the gateway as NextHop)", f)
			}
			if !n.subnet.IsValid() {
				n.subnet, n.gateway = p, gw
			}
		}
	}
	if !n.subnet.IsValid() {
		// Assumption: HNS gives a NAT network without Ipams a default subnet; the emulator
		// asks for one, so that addresses stay the caller's choice.
		return nil, hcnErrorf(computenetwork.HCN_E_SUBNET_NOT_FOUND, "Ipams: the emulator needs a subnet (Ipams[0].Subnets[0].IpAddressPrefix and its default route)")
	}
	for i, p := range doc.Policies {
		switch p.Type {
		case "SourceMacAddress", "NetAdapterName", "VSwitchExtension", "DrMacAddress", "AutomaticDNS",
			"InterfaceConstraint", "ProviderAddress", "RemoteSubnetRoute", "VxlanPort", "HostRoute",
			"SetPolicy", "L4Proxy", "LayerConstraint", "NetworkACL":
			// Known to HNS; recorded, without effect in the emulator.
		default:
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_POLICY_TYPE, "Policies[%d].Type: %q is not a network policy type", i, p.Type)
		}
	}
	doc.SchemaVersion = hcn.V2
	n.doc = *doc
	return n, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// lookup finds the object of kind (network, endpoint, namespace) whose id, in any form of GUID
// that HNS accepts, is id; an unknown one fails with notFound.
func lookup[T any](objects map[string]T, kind, id string, notFound computenetwork.HRESULT) (T, error) {
	var zero T
	cid, err := CanonicalGUID("id", id)
	if err != nil {
		return zero, err
	}
	o, ok := objects[cid]
	if !ok {
		return zero, hcnErrorf(notFound, "%s %q not found", kind, id)
	}
	return o, nil
}

func (h *Service) network(id string) (*hnsNetwork, error) {
	return lookup(h.networks, "network", id, computenetwork.HCN_E_NETWORK_NOT_FOUND)
}

func (h *Service) OpenNetwork(ctx context.Context, id string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.network(id)
	if err != nil {
		return "", err
	}
	return n.doc.Id, nil
}

func (h *Service) QueryNetwork(ctx context.Context, id, query string) (string, error) {
	if _, err := decodeQuery(query); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.network(id)
	if err != nil {
		return "", err
	}
	return marshalDoc(n.doc)
}

func (h *Service) ModifyNetwork(ctx context.Context, id, settings string) error {
	var req hcn.ModifyNetworkSettingRequest
	if err := hcnDecode(settings, &req, "ModifyNetworkSettingRequest"); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.network(id)
	if err != nil {
		return err
	}
	switch req.ResourceType {
	case "DNS":
		if req.RequestType != hcn.RequestUpdate {
			return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "RequestType: %q is not valid for ResourceType DNS (Update is)", req.RequestType)
		}
		var d hcn.Dns
		if err := hcnDecode(string(req.Settings), &d, "Settings"); err != nil {
			return err
		}
		if err := validateDNS("Settings", d); err != nil {
			return err
		}
		n.doc.Dns = d
		return nil
	}
	return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "ResourceType: %q is not supported by the emulator (DNS is)", req.ResourceType)
}

// DeleteNetwork deletes a network and, first, its endpoints. Assumption: HNS removes a
// network's endpoints with it (Remove-HnsNetwork with containers running cuts them off); the
// emulator does the same rather than leave endpoints on a network that is gone.
func (h *Service) DeleteNetwork(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.network(id)
	if err != nil {
		return err
	}
	for _, ep := range h.sortedEndpoints() {
		if ep.network == n {
			h.deleteEndpointLocked(ctx, ep)
		}
	}
	delete(h.networks, n.doc.Id)
	rerr := h.applyRulesLocked()
	if err := h.dp.delNetwork(n); err != nil {
		log.G(ctx).WithError(err).WithField("network", n.doc.Id).Warn("hcsemu: removing the network's bridge failed")
	}
	log.G(ctx).WithField("network", n.doc.Id).Info("hcsemu: HNS network deleted")
	return rerr
}

func (h *Service) EnumerateNetworks(ctx context.Context, query string) (string, error) {
	q, err := decodeQuery(query)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var docs []any
	for _, id := range sortedKeys(h.networks) {
		docs = append(docs, h.networks[id].doc)
	}
	return filterIDs(q, docs, nil)
}

// ---- endpoints

func (h *Service) CreateEndpoint(ctx context.Context, networkID, argID, settings string) (string, error) {
	var doc hcn.HostComputeEndpoint
	if err := hcnDecode(settings, &doc, "HostComputeEndpoint"); err != nil {
		return "", err
	}
	id, err := pickID(argID, doc.Id)
	if err != nil {
		return "", err
	}
	doc.Id = id
	if err := checkSchemaVersion(doc.SchemaVersion); err != nil {
		return "", err
	}
	if doc.HostComputeNamespace != "" {
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "HostComputeNamespace: %q: read-only; add the endpoint to a namespace with HcnModifyNamespace", doc.HostComputeNamespace)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return "", err
	}
	n, err := h.network(networkID)
	if err != nil {
		return "", err
	}
	if doc.HostComputeNetwork != "" {
		dn, err := CanonicalGUID("HostComputeNetwork", doc.HostComputeNetwork)
		if err != nil {
			return "", err
		}
		if dn != n.doc.Id {
			return "", hcnErrorf(computenetwork.E_INVALIDARG, "HostComputeNetwork: %q is not the network %q the endpoint is created on", doc.HostComputeNetwork, n.doc.Id)
		}
	}
	doc.HostComputeNetwork = n.doc.Id
	if _, ok := h.endpoints[id]; ok {
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "ID: an endpoint with id %q already exists", id)
	}
	ep := &hnsEndpoint{network: n}
	if err := h.validateEndpointLocked(ep, &doc); err != nil {
		return "", err
	}
	h.endpoints[id] = ep
	if err := h.applyRulesLocked(); err != nil {
		delete(h.endpoints, id)
		h.applyRulesLocked()
		return "", err
	}
	log.G(ctx).WithFields(log.Fields{"endpoint": id, "network": n.doc.Id, "ip": ep.ip}).Info("hcsemu: HNS endpoint created")
	return id, nil
}

// validateEndpointLocked checks doc against its network and the other endpoints and fills ep.
func (h *Service) validateEndpointLocked(ep *hnsEndpoint, doc *hcn.HostComputeEndpoint) error {
	n := ep.network
	remote := doc.Flags&hcn.EndpointFlagsRemoteEndpoint != 0
	if len(doc.IpConfigurations) > 1 {
		return hcnErrorf(computenetwork.E_NOTIMPL, "IpConfigurations: %d addresses; the emulator gives an endpoint one IPv4 address", len(doc.IpConfigurations))
	}
	used := map[netip.Addr]string{n.gateway: "the network's gateway"}
	for _, o := range h.endpoints {
		if o.network == n && o.doc.Id != doc.Id && !o.remote() {
			used[o.ip] = "endpoint " + o.doc.Id
		}
	}
	if len(doc.IpConfigurations) == 1 && doc.IpConfigurations[0].IpAddress != "" {
		c := doc.IpConfigurations[0]
		ip, err := netip.ParseAddr(c.IpAddress)
		if err != nil {
			return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].IpAddress: %q: %v", c.IpAddress, err)
		}
		if !ip.Is4() {
			return hcnErrorf(computenetwork.E_NOTIMPL, "IpConfigurations[0].IpAddress: %s: the emulator gives endpoints IPv4 addresses only", ip)
		}
		// A remote endpoint stands for an address on another host: kube-proxy makes one for
		// every Service backend on another node, with that pod's address, which on L2Bridge is
		// in the other node's subnet (winkernel/proxier.go syncProxyRules, hns.go
		// createEndpoint). Only a local endpoint must be in the network's subnet.
		inSubnet := n.subnet.Contains(ip)
		if !inSubnet && !remote {
			return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].IpAddress: %s is outside the network's subnet %s", ip, n.subnet)
		}
		if inSubnet && (ip == n.subnet.Addr() || ip == lastAddr(n.subnet)) {
			return hcnErrorf(computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "IpConfigurations[0].IpAddress: %s is the subnet's network or broadcast address", ip)
		}
		if who, ok := used[ip]; ok && (!remote || ip == n.gateway) {
			return hcnErrorf(computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "IpConfigurations[0].IpAddress: %s is in use by %s", ip, who)
		}
		if c.PrefixLength != 0 && inSubnet && int(c.PrefixLength) != n.subnet.Bits() {
			return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "IpConfigurations[0].PrefixLength: %d differs from the subnet's /%d", c.PrefixLength, n.subnet.Bits())
		}
		ep.ip = ip
	} else if remote {
		// Assumption: HNS does not allocate for a remote endpoint, whose address is another
		// host's (kube-proxy always gives it).
		return hcnErrorf(computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "IpConfigurations: a remote endpoint (Flags 1) needs the address it stands for")
	} else {
		// HNS allocates from the subnet when the caller gives no address.
		for a := n.subnet.Addr().Next(); n.subnet.Contains(a) && a != lastAddr(n.subnet); a = a.Next() {
			if _, ok := used[a]; !ok {
				ep.ip = a
				break
			}
		}
		if !ep.ip.IsValid() {
			return hcnErrorf(computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, "IpConfigurations: no free address left in %s", n.subnet)
		}
	}
	ep.prefix = n.subnet.Bits()
	if !n.subnet.Contains(ep.ip) {
		ep.prefix = 32
	}
	doc.IpConfigurations = []hcn.IpConfig{{IpAddress: ep.ip.String(), PrefixLength: uint8(ep.prefix)}}
	if doc.MacAddress != "" {
		mac, err := net.ParseMAC(doc.MacAddress)
		if err != nil || len(mac) != 6 {
			return hcnErrorf(computenetwork.E_INVALIDARG, "MacAddress: %q is not a MAC address (00-15-5D-01-02-03)", doc.MacAddress)
		}
		if mac[0]&1 != 0 {
			return hcnErrorf(computenetwork.E_INVALIDARG, "MacAddress: %q is a multicast address", doc.MacAddress)
		}
		ep.mac = mac
	} else {
		// Hyper-V's MAC prefix 00-15-5D, then the address's last three bytes.
		a := ep.ip.As4()
		ep.mac = net.HardwareAddr{0x00, 0x15, 0x5d, a[1], a[2], a[3]}
	}
	doc.MacAddress = strings.ToUpper(strings.ReplaceAll(ep.mac.String(), ":", "-"))
	for i, r := range doc.Routes {
		f := fmt.Sprintf("Routes[%d]", i)
		if _, err := netip.ParsePrefix(r.DestinationPrefix); err != nil {
			return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.DestinationPrefix: %q: %v", f, r.DestinationPrefix, err)
		}
		if r.NextHop != "" {
			hop, err := netip.ParseAddr(r.NextHop)
			if err != nil {
				return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.NextHop: %q: %v", f, r.NextHop, err)
			}
			if !n.subnet.Contains(hop) {
				return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.NextHop: %s is not reachable on the subnet %s", f, hop, n.subnet)
			}
		}
	}
	ep.routes = doc.Routes
	if len(ep.routes) == 0 {
		ep.routes = []hcn.Route{{DestinationPrefix: "0.0.0.0/0", NextHop: n.gateway.String()}}
	}
	if err := h.validatePoliciesLocked(ep, doc.Policies); err != nil {
		return err
	}
	if err := validateDNS("Dns", doc.Dns); err != nil {
		return err
	}
	doc.SchemaVersion = hcn.V2
	ep.doc = *doc
	return nil
}

// validatePoliciesLocked checks an endpoint's policies and sets its port mappings and
// outbound NAT from them.
func (h *Service) validatePoliciesLocked(ep *hnsEndpoint, policies []hcn.EndpointPolicy) error {
	var ports []portMapping
	var onat *[]netip.Prefix
	for i, p := range policies {
		f := fmt.Sprintf("Policies[%d]", i)
		switch p.Type {
		case hcn.PortMapping:
			var s hcn.PortMappingPolicySetting
			if err := hcnDecode(string(p.Settings), &s, f+".Settings"); err != nil {
				return err
			}
			pm := portMapping{proto: s.Protocol, external: s.ExternalPort, internal: s.InternalPort}
			if s.Protocol != 6 && s.Protocol != 17 {
				return hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "%s.Settings.Protocol: %d is not TCP (6) or UDP (17)", f, s.Protocol)
			}
			if s.InternalPort == 0 {
				return hcnErrorf(computenetwork.HCN_E_INVALID_INTERNAL_PORT, "%s.Settings.InternalPort: missing", f)
			}
			if s.ExternalPort == 0 {
				return hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "%s.Settings.ExternalPort: missing", f)
			}
			switch {
			case s.Flags&^(natFlagsLocalRoutedVip|natFlagsIPv6) != 0:
				return hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "%s.Settings.Flags: %#x has bits HNS does not define (LocalRoutedVip 1, IPv6 2)", f, s.Flags)
			case s.Flags&natFlagsIPv6 != 0:
				return hcnErrorf(computenetwork.E_NOTIMPL, "%s.Settings.Flags: %#x asks for an IPv6 mapping; the emulator models IPv4 only", f, s.Flags)
			}
			pm.fromHost = hostReachOf(ep.network.doc.Type, s.Flags, h.build)
			if s.VIP != "" {
				vip, err := netip.ParseAddr(s.VIP)
				if err != nil || !vip.Is4() {
					return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.Settings.VIP: %q is not an IPv4 address", f, s.VIP)
				}
				pm.vip = vip
			}
			for _, o := range ports {
				if o.proto == pm.proto && o.external == pm.external {
					return hcnErrorf(computenetwork.HCN_E_PORT_ALREADY_EXISTS, "%s.Settings.ExternalPort: %d/%d is mapped twice", f, pm.external, pm.proto)
				}
			}
			for _, o := range h.endpoints {
				if o == ep || o.doc.Id == ep.doc.Id {
					continue
				}
				for _, op := range o.ports {
					if op.proto == pm.proto && op.external == pm.external && (!op.vip.IsValid() || !pm.vip.IsValid() || op.vip == pm.vip) {
						// hcsshim's IsPortAlreadyExistsError: the code HNS answers with.
						return hcnErrorf(computenetwork.HCN_E_PORT_ALREADY_EXISTS, "%s.Settings.ExternalPort: %d (protocol %d) is already mapped to endpoint %s", f, pm.external, pm.proto, o.doc.Id)
					}
				}
			}
			ports = append(ports, pm)
		case hcn.OutBoundNAT:
			var s hcn.OutboundNatPolicySetting
			if err := hcnDecode(string(p.Settings), &s, f+".Settings"); err != nil {
				return err
			}
			var ex []netip.Prefix
			for j, e := range s.Exceptions {
				pf, err := parsePrefixOrAddr(e)
				if err != nil {
					return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.Settings.Exceptions[%d]: %q: %v", f, j, e, err)
				}
				ex = append(ex, pf)
			}
			onat = &ex
		case hcn.NetworkProviderAddress:
			// The address of the host a remote endpoint lives on (kube-proxy on overlay);
			// recorded: the emulated host routes to remote endpoints by their own address.
			var s hcn.ProviderAddressEndpointPolicySetting
			if err := hcnDecode(string(p.Settings), &s, f+".Settings"); err != nil {
				return err
			}
			if a, err := netip.ParseAddr(s.ProviderAddress); err != nil || !a.Is4() {
				return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.Settings.ProviderAddress: %q is not an IPv4 address", f, s.ProviderAddress)
			}
		case hcn.ACL, hcn.QOS, hcn.L2Driver, hcn.SDNRoute, hcn.L4Proxy, hcn.L4WFPPROXY, hcn.PortName,
			hcn.EncapOverhead, hcn.IOV, hcn.NetworkInterfaceConstraint, hcn.TierAcl:
			// Known to HNS; recorded, without effect in the emulator (docs/emulator.md, "HNS").
		default:
			return hcnErrorf(computenetwork.HCN_E_INVALID_POLICY_TYPE, "%s.Type: %q is not an endpoint policy type", f, p.Type)
		}
	}
	ep.ports, ep.outboundNAT = ports, onat
	return nil
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (h *Service) endpoint(id string) (*hnsEndpoint, error) {
	return lookup(h.endpoints, "endpoint", id, computenetwork.HCN_E_ENDPOINT_NOT_FOUND)
}

func (h *Service) OpenEndpoint(ctx context.Context, id string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return "", err
	}
	return ep.doc.Id, nil
}

func (h *Service) QueryEndpoint(ctx context.Context, id, query string) (string, error) {
	if _, err := decodeQuery(query); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return "", err
	}
	return marshalDoc(ep.doc)
}

// ModifyEndpoint applies a Policy request (Add, Remove, Update) to an endpoint.
func (h *Service) ModifyEndpoint(ctx context.Context, id, settings string) error {
	var req hcn.ModifyEndpointSettingRequest
	if err := hcnDecode(settings, &req, "ModifyEndpointSettingRequest"); err != nil {
		return err
	}
	if req.ResourceType != "Policy" {
		return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "ResourceType: %q is not supported by the emulator (Policy is)", req.ResourceType)
	}
	var pr hcn.PolicyEndpointRequest
	if err := hcnDecode(string(req.Settings), &pr, "Settings"); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return err
	}
	var policies []hcn.EndpointPolicy
	switch req.RequestType {
	case hcn.RequestAdd:
		policies = append(slices.Clone(ep.doc.Policies), pr.Policies...)
	case hcn.RequestUpdate:
		policies = pr.Policies
	case hcn.RequestRemove:
		for _, p := range ep.doc.Policies {
			if !slices.ContainsFunc(pr.Policies, func(q hcn.EndpointPolicy) bool {
				return q.Type == p.Type && string(q.Settings) == string(p.Settings)
			}) {
				policies = append(policies, p)
			}
		}
		if len(policies)+len(pr.Policies) != len(ep.doc.Policies) {
			return hcnErrorf(computenetwork.HCN_E_POLICY_NOT_FOUND, "Settings.Policies: not every policy to remove is on endpoint %s", ep.doc.Id)
		}
	default:
		return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "RequestType: %q is not valid for ResourceType Policy", req.RequestType)
	}
	oldPorts, oldNAT := ep.ports, ep.outboundNAT
	if err := h.validatePoliciesLocked(ep, policies); err != nil {
		return err
	}
	if err := h.applyRulesLocked(); err != nil {
		ep.ports, ep.outboundNAT = oldPorts, oldNAT
		h.applyRulesLocked()
		return err
	}
	ep.doc.Policies = policies
	return nil
}

func (h *Service) DeleteEndpoint(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, err := h.endpoint(id)
	if err != nil {
		return err
	}
	h.deleteEndpointLocked(ctx, ep)
	return h.applyRulesLocked()
}

// deleteEndpointLocked detaches the endpoint from its namespace (if any) and forgets it; the
// caller reapplies the rules.
func (h *Service) deleteEndpointLocked(ctx context.Context, ep *hnsEndpoint) {
	if ns := ep.namespace; ns != nil {
		h.detachLocked(ctx, ep)
	}
	if ep.nic != nil {
		// Assumption: a deleted endpoint's NIC loses its network (HNS removes the port);
		// the VM's NIC record goes with the NIC's Remove or the VM (detachVMNIC).
		if err := h.dp.detach(ep); err != nil {
			log.G(ctx).WithError(err).WithField("endpoint", ep.doc.Id).Warn("hcsemu: removing the endpoint's link from its VM failed")
		}
		ep.nic = nil
	}
	delete(h.endpoints, ep.doc.Id)
	log.G(ctx).WithField("endpoint", ep.doc.Id).Info("hcsemu: HNS endpoint deleted")
}

func (h *Service) EnumerateEndpoints(ctx context.Context, query string) (string, error) {
	q, err := decodeQuery(query)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var docs []any
	for _, ep := range h.sortedEndpoints() {
		docs = append(docs, ep.doc)
	}
	// hcsshim's ListEndpointsOfNetwork filters on the v1 name of the network field.
	return filterIDs(q, docs, map[string]string{"VirtualNetwork": "HostComputeNetwork"})
}

func (h *Service) sortedEndpoints() []*hnsEndpoint {
	out := make([]*hnsEndpoint, 0, len(h.endpoints))
	for _, id := range sortedKeys(h.endpoints) {
		out = append(out, h.endpoints[id])
	}
	return out
}

// ---- namespaces

func (h *Service) CreateNamespace(ctx context.Context, argID, settings string) (string, error) {
	var doc hcn.HostComputeNamespace
	if err := hcnDecode(settings, &doc, "HostComputeNamespace"); err != nil {
		return "", err
	}
	id, err := pickID(argID, doc.Id)
	if err != nil {
		return "", err
	}
	doc.Id = id
	if err := checkSchemaVersion(doc.SchemaVersion); err != nil {
		return "", err
	}
	switch doc.Type {
	case "":
		doc.Type = hcn.NamespaceHost
	case hcn.NamespaceHost, hcn.NamespaceHostDefault:
	case hcn.NamespaceGuest, hcn.NamespaceGuestDefault:
		return "", hcnErrorf(computenetwork.E_NOTIMPL, "Type: %q namespaces are not emulated: a utility VM's guest takes the pod's Host namespace (a NetworkNamespace guest request) and its endpoints as NICs", doc.Type)
	default:
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "Type: %q is not Host, HostDefault, Guest or GuestDefault", doc.Type)
	}
	if len(doc.Resources) > 0 {
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "Resources: add endpoints with HcnModifyNamespace after the namespace exists")
	}
	if doc.NamespaceId != 0 {
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "NamespaceId: %d: read-only, HNS assigns the compartment", doc.NamespaceId)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return "", err
	}
	if _, ok := h.namespaces[id]; ok {
		return "", hcnErrorf(computenetwork.E_INVALIDARG, "ID: a namespace with id %q already exists", id)
	}
	if _, err := h.newNamespaceLocked(ctx, doc); err != nil {
		return "", err
	}
	return id, nil
}

// newNamespaceLocked makes a namespace of a checked document whose id is free.
func (h *Service) newNamespaceLocked(ctx context.Context, doc hcn.HostComputeNamespace) (*hnsNamespace, error) {
	doc.SchemaVersion = hcn.V2
	doc.NamespaceId = h.nextCompartment
	ns := &hnsNamespace{doc: doc}
	if err := h.dp.addNamespace(ns); err != nil {
		return nil, hcnErrorf(computenetwork.E_FAIL, "namespace %s: %v", doc.Id, err)
	}
	h.nextCompartment++
	h.namespaces[doc.Id] = ns
	log.G(ctx).WithFields(log.Fields{"namespace": doc.Id, "netns": ns.path}).Info("hcsemu: HNS namespace created")
	return ns, nil
}

func (h *Service) namespace(id string) (*hnsNamespace, error) {
	// HNS answers ERROR_NOT_FOUND ("Element not found.") for an unknown namespace (hcsshim's
	// hns.issueNamespaceRequest matches that text).
	return lookup(h.namespaces, "namespace", id, computenetwork.E_ELEMENT_NOT_FOUND)
}

func (h *Service) OpenNamespace(ctx context.Context, id string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(id)
	if err != nil {
		return "", err
	}
	return ns.doc.Id, nil
}

func (ns *hnsNamespace) docLocked() hcn.HostComputeNamespace {
	d := ns.doc
	d.Resources = nil
	for _, c := range ns.containers {
		b, _ := json.Marshal(hcn.NamespaceResourceData{Id: c})
		d.Resources = append(d.Resources, hcn.NamespaceResource{Type: hcn.ResourceContainer, Data: b})
	}
	for _, ep := range ns.endpoints {
		b, _ := json.Marshal(hcn.NamespaceResourceData{Id: ep.doc.Id})
		d.Resources = append(d.Resources, hcn.NamespaceResource{Type: hcn.ResourceEndpoint, Data: b})
	}
	return d
}

func (h *Service) QueryNamespace(ctx context.Context, id, query string) (string, error) {
	if _, err := decodeQuery(query); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(id)
	if err != nil {
		return "", err
	}
	return marshalDoc(ns.docLocked())
}

// ModifyNamespace adds or removes an endpoint.
func (h *Service) ModifyNamespace(ctx context.Context, id, settings string) error {
	var req hcn.ModifyNamespaceSettingRequest
	if err := hcnDecode(settings, &req, "ModifyNamespaceSettingRequest"); err != nil {
		return err
	}
	if req.ResourceType != hcn.ResourceEndpoint {
		return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "ResourceType: %q: only Endpoint resources are added by callers (HCS adds containers)", req.ResourceType)
	}
	var er hcn.NamespaceEndpointRequest
	if err := hcnDecode(string(req.Settings), &er, "Settings"); err != nil {
		return err
	}
	if er.EndpointId == "" {
		return hcnErrorf(computenetwork.HCN_E_INVALID_JSON, "Settings.EndpointId: missing required field")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(id)
	if err != nil {
		return err
	}
	ep, err := h.endpoint(er.EndpointId)
	if err != nil {
		return err
	}
	switch req.RequestType {
	case hcn.RequestAdd:
		return h.attachLocked(ctx, ep, ns)
	case hcn.RequestRemove:
		if ep.namespace != ns {
			return hcnErrorf(computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "Settings.EndpointId: endpoint %s is not in namespace %s", ep.doc.Id, ns.doc.Id)
		}
		h.detachLocked(ctx, ep)
		return nil
	}
	return hcnErrorf(computenetwork.HCN_E_REQUEST_UNSUPPORTED, "RequestType: %q is not valid for ResourceType Endpoint (Add, Remove)", req.RequestType)
}

func (h *Service) attachLocked(ctx context.Context, ep *hnsEndpoint, ns *hnsNamespace) error {
	switch {
	case ep.nic != nil:
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "Settings.EndpointId: endpoint %s is NIC %q of utility VM %q", ep.doc.Id, ep.nic.nic, ep.nic.vm)
	case ep.namespace == ns:
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS, "Settings.EndpointId: endpoint %s is already in namespace %s", ep.doc.Id, ns.doc.Id)
	case ep.namespace != nil:
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "Settings.EndpointId: endpoint %s is already in another namespace, %s", ep.doc.Id, ep.namespace.doc.Id)
	case ep.remote():
		return hcnErrorf(computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "Settings.EndpointId: endpoint %s is a remote endpoint", ep.doc.Id)
	}
	if err := h.dp.attach(ep, ns, len(ns.endpoints)); err != nil {
		return hcnErrorf(computenetwork.E_FAIL, "attach endpoint %s to namespace %s: %v", ep.doc.Id, ns.doc.Id, err)
	}
	ep.namespace = ns
	ep.doc.HostComputeNamespace = ns.doc.Id
	ns.endpoints = append(ns.endpoints, ep)
	log.G(ctx).WithFields(log.Fields{"endpoint": ep.doc.Id, "namespace": ns.doc.Id}).Info("hcsemu: HNS endpoint added to namespace")
	return nil
}

func (h *Service) detachLocked(ctx context.Context, ep *hnsEndpoint) {
	ns := ep.namespace
	if ep.nic != nil {
		// A VM's NIC stays the VM's (its link is in the VM): only its namespace is left.
	} else if err := h.dp.detach(ep); err != nil {
		log.G(ctx).WithError(err).WithField("endpoint", ep.doc.Id).Warn("hcsemu: removing the endpoint's veth pair failed")
	}
	ns.endpoints = slices.DeleteFunc(ns.endpoints, func(e *hnsEndpoint) bool { return e == ep })
	ep.namespace = nil
	ep.doc.HostComputeNamespace = ""
}

// DeleteNamespace deletes a namespace, detaching its endpoints first. Containers still in it
// keep their network (the Linux namespace lives while they run), as a compartment outlives
// its HNS object on Windows while a container holds it.
func (h *Service) DeleteNamespace(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(id)
	if err != nil {
		return err
	}
	h.deleteNamespaceLocked(ctx, ns)
	return nil
}

func (h *Service) deleteNamespaceLocked(ctx context.Context, ns *hnsNamespace) {
	for len(ns.endpoints) > 0 {
		h.detachLocked(ctx, ns.endpoints[0])
	}
	delete(h.namespaces, ns.doc.Id)
	if err := h.dp.delNamespace(ns); err != nil {
		log.G(ctx).WithError(err).WithField("namespace", ns.doc.Id).Warn("hcsemu: removing the namespace's netns failed")
	}
	log.G(ctx).WithField("namespace", ns.doc.Id).Info("hcsemu: HNS namespace deleted")
}

func (h *Service) EnumerateNamespaces(ctx context.Context, query string) (string, error) {
	q, err := decodeQuery(query)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var docs []any
	for _, id := range sortedKeys(h.namespaces) {
		docs = append(docs, h.namespaces[id].docLocked())
	}
	return filterIDs(q, docs, nil)
}

// joinContainer records a compute system in a namespace and returns the netns file its
// processes run in. An unknown namespace fails naming the document field.
func (h *Service) JoinContainer(nsID, system string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(nsID)
	if err != nil {
		e := hresult.As(err)
		return "", &hresult.Error{HResult: e.HResult, Message: "Container.Networking.Namespace: " + e.Message}
	}
	ns.containers = append(ns.containers, system)
	return h.dp.netnsPath(ns), nil
}

// systemNamespace makes a namespace for a compute system whose document lists endpoints
// without naming a namespace (Container.Networking.NetworkAdapters, the v1 EndpointList way):
// on Windows HCS puts them in the container's own compartment; here that is a namespace of
// the emulator's, holding the system and the endpoints, which deleteSystemNamespace removes
// with the system. Every endpoint is checked before anything is made (it exists, is not a
// remote one and is in no namespace yet), and nothing is left when one fails. It returns the
// namespace's id and the netns file the system's processes run in.
//
// field names endpoint i in errors: the document's field, or the request's that hot-adds it
// (hcsv1_linux.go).
func (h *Service) SystemNamespace(ctx context.Context, system string, endpoints []string, field func(i int) string) (string, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return "", "", err
	}
	eps := make([]*hnsEndpoint, 0, len(endpoints))
	for i, id := range endpoints {
		field := field(i)
		ep, err := h.endpoint(id)
		if err != nil {
			e := hresult.As(err)
			return "", "", &hresult.Error{HResult: e.HResult, Message: field + ": " + e.Message}
		}
		switch {
		case slices.Contains(eps, ep):
			return "", "", hcnErrorf(computenetwork.E_INVALIDARG, "%s: endpoint %s is listed twice", field, ep.doc.Id)
		case ep.namespace != nil:
			return "", "", hcnErrorf(computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "%s: endpoint %s is already in namespace %s", field, ep.doc.Id, ep.namespace.doc.Id)
		case ep.remote():
			return "", "", hcnErrorf(computenetwork.HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION, "%s: endpoint %s is a remote endpoint", field, ep.doc.Id)
		}
		eps = append(eps, ep)
	}
	ns, err := h.newNamespaceLocked(ctx, hcn.HostComputeNamespace{Id: hresult.NewGUID(), Type: hcn.NamespaceHost})
	if err != nil {
		return "", "", err
	}
	for i, ep := range eps {
		if err := h.attachLocked(ctx, ep, ns); err != nil {
			h.deleteNamespaceLocked(ctx, ns)
			e := hresult.As(err)
			return "", "", &hresult.Error{HResult: e.HResult, Message: field(i) + ": " + e.Message}
		}
	}
	ns.containers = append(ns.containers, system)
	return ns.doc.Id, h.dp.netnsPath(ns), nil
}

// deleteSystemNamespace removes a namespace systemNamespace made, with the system: its
// endpoints are detached (they are the caller's, and stay), the namespace is deleted.
func (h *Service) DeleteSystemNamespace(ctx context.Context, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ns, err := h.namespace(id); err == nil {
		h.deleteNamespaceLocked(ctx, ns)
	}
}

// namespaceDNS is the DNS of the network adapters of a container in namespace nsID: its
// endpoints' (dns.go), in the order they joined it, without those plugged into a utility VM.
func (h *Service) NamespaceDNS(nsID string) []AdapterDNS {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(nsID)
	if err != nil {
		return nil
	}
	var out []AdapterDNS
	for _, ep := range ns.endpoints {
		if ep.nic == nil {
			out = append(out, AdapterDNS{mac: ep.doc.MacAddress, dns: ep.doc.Dns})
		}
	}
	return out
}

// vmDNS is the DNS of the network adapters of utility VM vm, which its hosted containers share:
// its NICs' endpoints', in the order of their ids.
func (h *Service) VMDNS(vm string) []AdapterDNS {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []AdapterDNS
	for _, ep := range h.sortedEndpoints() {
		if ep.nic != nil && ep.nic.vm == vm {
			out = append(out, AdapterDNS{mac: ep.doc.MacAddress, dns: ep.doc.Dns})
		}
	}
	return out
}

// leaveContainer forgets a compute system's membership (it stopped).
func (h *Service) LeaveContainer(nsID, system string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ns, err := h.namespace(nsID); err == nil {
		if i := slices.Index(ns.containers, system); i >= 0 {
			ns.containers = slices.Delete(ns.containers, i, i+1)
		}
	}
}

// systemEndpoint adds (add) or removes an endpoint to or from the HNS namespace nsID that the
// compute system runs in: HCS v1's Network modify request (hcsv1_linux.go), which hcsshim's
// HotAttachEndpoint and HotDetachEndpoint send. Errors name the request's field, Settings (the
// endpoint id).
func (h *Service) SystemEndpoint(ctx context.Context, nsID, system, epID string, add bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ns, err := h.namespace(nsID)
	if err != nil {
		e := hresult.As(err)
		return &hresult.Error{HResult: e.HResult, Message: fmt.Sprintf("the network namespace of compute system %q: %s", system, e.Message)}
	}
	ep, err := h.endpoint(epID)
	if err != nil {
		e := hresult.As(err)
		return &hresult.Error{HResult: e.HResult, Message: "Settings: " + e.Message}
	}
	if add {
		if err := h.attachLocked(ctx, ep, ns); err != nil {
			e := hresult.As(err)
			return &hresult.Error{HResult: e.HResult, Message: strings.Replace(e.Message, "Settings.EndpointId:", "Settings:", 1)}
		}
		return nil
	}
	if ep.namespace != ns {
		// Assumption: HCS refuses to remove an endpoint the container does not have; the code
		// is HNS's for an endpoint not found where it was looked for.
		return hcnErrorf(computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "Settings: endpoint %s is not attached to compute system %q (not in its namespace %s)", ep.doc.Id, system, ns.doc.Id)
	}
	h.detachLocked(ctx, ep)
	log.G(ctx).WithFields(log.Fields{"endpoint": ep.doc.Id, "namespace": ns.doc.Id, "system": system}).Info("hcsemu: HNS endpoint removed from the system's namespace")
	return nil
}

// applyRulesLocked gives the dataplane the NAT rules of the current objects.
func (h *Service) applyRulesLocked() error {
	var nets []*hnsNetwork
	for _, id := range sortedKeys(h.networks) {
		nets = append(nets, h.networks[id])
	}
	lbs, remote := h.lbRulesLocked()
	if err := h.dp.setRules(nets, h.sortedEndpoints(), lbs, remote); err != nil {
		return hcnErrorf(computenetwork.E_FAIL, "NAT rules of the emulated host: %v", err)
	}
	return nil
}

// close removes every object and the dataplane.
func (h *Service) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	clear(h.loadBalancers)
	for _, ep := range h.sortedEndpoints() {
		h.deleteEndpointLocked(ctx, ep)
	}
	for _, id := range sortedKeys(h.namespaces) {
		ns := h.namespaces[id]
		delete(h.namespaces, id)
		h.dp.delNamespace(ns)
	}
	for _, id := range sortedKeys(h.networks) {
		n := h.networks[id]
		delete(h.networks, id)
		h.dp.delNetwork(n)
	}
	return h.dp.close()
}

// ---- queries

func decodeQuery(query string) (hcn.HostComputeQuery, error) {
	var q hcn.HostComputeQuery
	if err := decodeOptionalHCN(query, &q, "HostComputeQuery"); err != nil {
		return q, err
	}
	if err := checkSchemaVersion(q.SchemaVersion); err != nil {
		return q, err
	}
	return q, nil
}

func decodeOptionalHCN(doc string, v any, what string) error {
	if strings.TrimSpace(doc) == "" {
		return nil
	}
	return hcnDecode(doc, v, what)
}

// filterIDs returns the JSON array of the ids of the documents the query's Filter matches.
// A filter is an object of field → value; aliases map v1 field names to v2 ones. Strings
// compare without case (HNS ids and names are case-insensitive); a field the documents do not
// have is an error naming it.
func filterIDs(q hcn.HostComputeQuery, docs []any, aliases map[string]string) (string, error) {
	var filter map[string]any
	if q.Filter != "" {
		if err := json.Unmarshal([]byte(q.Filter), &filter); err != nil {
			return "", hcnErrorf(computenetwork.HCN_E_INVALID_JSON, "Filter: %q is not a JSON object: %v", q.Filter, err)
		}
	}
	ids := []string{}
	for _, d := range docs {
		b, _ := json.Marshal(d)
		var m map[string]any
		json.Unmarshal(b, &m)
		ok := true
		for k, want := range filter {
			field := k
			if a, has := aliases[k]; has {
				field = a
			}
			if !knownField(d, field) {
				return "", hcnErrorf(computenetwork.E_INVALIDARG, "Filter.%s: not a field of the objects queried", k)
			}
			if !sameValue(m[field], want) {
				ok = false
				break
			}
		}
		if ok {
			ids = append(ids, m["ID"].(string))
		}
	}
	b, _ := json.Marshal(ids)
	return string(b), nil
}

func knownField(doc any, field string) bool {
	var prefix string
	switch doc.(type) {
	case hcn.HostComputeNetwork:
		prefix = "net"
	case hcn.HostComputeEndpoint:
		prefix = "ep"
	case hcn.HostComputeNamespace:
		prefix = "ns"
	case hcn.HostComputeLoadBalancer:
		prefix = "lb"
	}
	_, ok := jsonFieldNames[prefix+"."+field]
	return ok
}

var jsonFieldNames = func() map[string]struct{} {
	m := map[string]struct{}{}
	add := func(prefix string, v any) {
		for _, k := range hresult.FieldNames(reflect.TypeOf(v)) {
			m[prefix+"."+k] = struct{}{}
		}
	}
	add("net", hcn.HostComputeNetwork{})
	add("ep", hcn.HostComputeEndpoint{})
	add("ns", hcn.HostComputeNamespace{})
	add("lb", hcn.HostComputeLoadBalancer{})
	return m
}()

func sameValue(have, want any) bool {
	hs, hok := have.(string)
	ws, wok := want.(string)
	if hok && wok {
		return strings.EqualFold(hs, ws)
	}
	hb, _ := json.Marshal(have)
	wb, _ := json.Marshal(want)
	return string(hb) == string(wb)
}

func marshalDoc(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
