package hns

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// Load balancers: HCN's HostComputeLoadBalancer, what kube-proxy's winkernel proxier programs a
// Service into (ClusterIP: a frontend VIP; NodePort: no VIP, the host's addresses; externalIPs
// and load-balancer ingress IPs: a VIP with VipExternalIP). The facts of kube-proxy's use are in
// docs/notes/kube-proxy-hns.md. A load balancer is kept with the other HNS objects
// (gone with the daemon, nothing of it in the kernel after its deletion) and made real as
// nftables DNAT rules in the emulated host (lbRules, dataplane_linux.go).
//
// Assumptions, where Windows' behaviour is not documented: an unknown load balancer id is
// ERROR_NOT_FOUND (hcsshim and hnslib define no load-balancer code; kube-proxy finds load
// balancers by enumerating with an ID filter and only tests hcn.IsNotFoundError); a load
// balancer needs at least one endpoint and one port mapping; an endpoint deleted while a load
// balancer names it stops receiving traffic and stays listed in the load balancer's document.

// hnsLoadBalancer is one load balancer.
type hnsLoadBalancer struct {
	doc       hcn.HostComputeLoadBalancer
	endpoints []string // canonical endpoint ids, in the document's order
	vips      []netip.Addr
}

// external reports a load balancer whose VIPs are reached from outside the host's networks
// (externalIPs, ingress IPs, NodePorts): kube-proxy's VipExternalIP flag, or no VIP at all
// (the host's addresses). A ClusterIP is reached only from the host and its networks.
func (lb *hnsLoadBalancer) external(pm hcn.LoadBalancerPortMapping) bool {
	return len(lb.vips) == 0 || pm.Flags&hcn.LoadBalancerPortMappingFlagsVipExternalIP != 0
}

// validateLoadBalancerLocked checks doc against the endpoints and the other load balancers
// (except self, for a modify) and returns the load balancer it describes.
func (h *Service) validateLoadBalancerLocked(doc *hcn.HostComputeLoadBalancer, self string) (*hnsLoadBalancer, error) {
	if err := checkSchemaVersion(doc.SchemaVersion); err != nil {
		return nil, err
	}
	lb := &hnsLoadBalancer{}
	switch {
	case doc.Flags&^(hcn.LoadBalancerFlagsDSR|hcn.LoadBalancerFlagsIPv6) != 0:
		return nil, hcnErrorf(computenetwork.E_INVALIDARG, "Flags: %#x has bits HNS does not define (DSR 1, IPv6 2)", doc.Flags)
	case doc.Flags&hcn.LoadBalancerFlagsIPv6 != 0:
		return nil, hcnErrorf(computenetwork.E_NOTIMPL, "Flags: %#x asks for an IPv6 load balancer; the emulator models IPv4 only", doc.Flags)
	}
	if len(doc.HostComputeEndpoints) == 0 {
		return nil, hcnErrorf(computenetwork.E_INVALIDARG, "HostComputeEndpoints: a load balancer needs at least one endpoint")
	}
	for i, id := range doc.HostComputeEndpoints {
		f := fmt.Sprintf("HostComputeEndpoints[%d]", i)
		cid, err := CanonicalGUID(f, id)
		if err != nil {
			return nil, err
		}
		if _, ok := h.endpoints[cid]; !ok {
			return nil, hcnErrorf(computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "%s: endpoint %q not found", f, id)
		}
		if slices.Contains(lb.endpoints, cid) {
			return nil, hcnErrorf(computenetwork.E_INVALIDARG, "%s: endpoint %q is listed twice", f, id)
		}
		lb.endpoints = append(lb.endpoints, cid)
	}
	if doc.SourceVIP != "" {
		if a, err := netip.ParseAddr(doc.SourceVIP); err != nil || !a.Is4() {
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "SourceVIP: %q is not an IPv4 address", doc.SourceVIP)
		}
	}
	for i, v := range doc.FrontendVIPs {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "FrontendVIPs[%d]: %q is not an IPv4 address", i, v)
		}
		if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() {
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_IP, "FrontendVIPs[%d]: %s cannot be a frontend address", i, a)
		}
		if slices.Contains(lb.vips, a) {
			return nil, hcnErrorf(computenetwork.E_INVALIDARG, "FrontendVIPs[%d]: %s is listed twice", i, a)
		}
		lb.vips = append(lb.vips, a)
	}
	if len(doc.PortMappings) == 0 {
		return nil, hcnErrorf(computenetwork.E_INVALIDARG, "PortMappings: a load balancer needs at least one port mapping")
	}
	const knownFlags = hcn.LoadBalancerPortMappingFlagsILB | hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP |
		hcn.LoadBalancerPortMappingFlagsUseMux | hcn.LoadBalancerPortMappingFlagsPreserveDIP | hcn.LoadBalancerPortMappingFlagsVipExternalIP
	for i, pm := range doc.PortMappings {
		f := fmt.Sprintf("PortMappings[%d]", i)
		switch {
		case pm.Protocol != 6 && pm.Protocol != 17:
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "%s.Protocol: %d is not TCP (6) or UDP (17)", f, pm.Protocol)
		case pm.InternalPort == 0:
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_INTERNAL_PORT, "%s.InternalPort: missing", f)
		case pm.ExternalPort == 0:
			return nil, hcnErrorf(computenetwork.HCN_E_INVALID_POLICY, "%s.ExternalPort: missing", f)
		case pm.DistributionType > hcn.LoadBalancerDistributionSourceIP:
			return nil, hcnErrorf(computenetwork.E_INVALIDARG, "%s.DistributionType: %d is not None (0), SourceIPProtocol (1) or SourceIP (2)", f, pm.DistributionType)
		case pm.Flags&^knownFlags != 0:
			return nil, hcnErrorf(computenetwork.E_INVALIDARG, "%s.Flags: %#x has bits HNS does not define (ILB 1, LocalRoutedVIP 2, UseMux 4, PreserveDIP 8, VipExternalIP 16)", f, pm.Flags)
		}
		for j, o := range doc.PortMappings[:i] {
			if o.Protocol == pm.Protocol && o.ExternalPort == pm.ExternalPort {
				return nil, hcnErrorf(computenetwork.HCN_E_PORT_ALREADY_EXISTS, "%s.ExternalPort: %d (protocol %d) is also PortMappings[%d]'s", f, pm.ExternalPort, pm.Protocol, j)
			}
		}
		// Two load balancers cannot share a frontend (a VIP, or the host's addresses, with a
		// protocol and port): kube-proxy expects HCN_E_PORT_ALREADY_EXISTS (hcn's
		// IsPortAlreadyExistsError, winkernel/hns.go createOrReplaceLoadbalancer) and then
		// replaces the old one.
		for _, oid := range sortedKeys(h.loadBalancers) {
			o := h.loadBalancers[oid]
			if oid == self || !sameFrontend(o.vips, lb.vips) {
				continue
			}
			for _, op := range o.doc.PortMappings {
				if op.Protocol == pm.Protocol && op.ExternalPort == pm.ExternalPort {
					return nil, hcnErrorf(computenetwork.HCN_E_PORT_ALREADY_EXISTS, "%s.ExternalPort: %d (protocol %d) at %s is load balancer %s's frontend",
						f, pm.ExternalPort, pm.Protocol, frontendText(lb.vips), oid)
				}
			}
		}
	}
	doc.SchemaVersion = hcn.V2
	lb.doc = *doc
	return lb, nil
}

// sameFrontend reports two frontends that overlap: both the host's addresses (no VIP), or a VIP
// in common.
func sameFrontend(a, b []netip.Addr) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == 0 && len(b) == 0
	}
	for _, v := range a {
		if slices.Contains(b, v) {
			return true
		}
	}
	return false
}

func frontendText(vips []netip.Addr) string {
	if len(vips) == 0 {
		return "the host's addresses"
	}
	var s []string
	for _, v := range vips {
		s = append(s, v.String())
	}
	return strings.Join(s, ", ")
}

func (h *Service) loadBalancer(id string) (*hnsLoadBalancer, error) {
	return lookup(h.loadBalancers, "load balancer", id, computenetwork.E_ELEMENT_NOT_FOUND)
}

// CreateLoadBalancer is HcnCreateLoadBalancer.
func (h *Service) CreateLoadBalancer(ctx context.Context, argID, settings string) (string, error) {
	var doc hcn.HostComputeLoadBalancer
	if err := hcnDecode(settings, &doc, "HostComputeLoadBalancer"); err != nil {
		return "", err
	}
	id, err := pickID(argID, doc.Id)
	if err != nil {
		return "", err
	}
	doc.Id = id
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.live(); err != nil {
		return "", err
	}
	if _, ok := h.loadBalancers[id]; ok {
		return "", hcnErrorf(computenetwork.HCN_E_POLICY_ALREADY_EXISTS, "ID: a load balancer with id %q already exists", id)
	}
	lb, err := h.validateLoadBalancerLocked(&doc, "")
	if err != nil {
		return "", err
	}
	h.loadBalancers[id] = lb
	if err := h.applyRulesLocked(); err != nil {
		delete(h.loadBalancers, id)
		h.applyRulesLocked()
		return "", err
	}
	log.G(ctx).WithFields(log.Fields{"loadbalancer": id, "vips": doc.FrontendVIPs, "endpoints": len(lb.endpoints)}).Info("hcsemu: HNS load balancer created")
	return id, nil
}

// OpenLoadBalancer is HcnOpenLoadBalancer.
func (h *Service) OpenLoadBalancer(ctx context.Context, id string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lb, err := h.loadBalancer(id)
	if err != nil {
		return "", err
	}
	return lb.doc.Id, nil
}

// QueryLoadBalancer is HcnQueryLoadBalancerProperties. hnslib passes the query it enumerated
// with (an ID filter among them) to every properties query; the filter does not apply here.
func (h *Service) QueryLoadBalancer(ctx context.Context, id, query string) (string, error) {
	if _, err := decodeQuery(query); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lb, err := h.loadBalancer(id)
	if err != nil {
		return "", err
	}
	return marshalDoc(lb.doc)
}

// ModifyLoadBalancer is HcnModifyLoadBalancer: the settings are a whole new document (hnslib's
// HostComputeLoadBalancer.Update sends the load balancer as kube-proxy wants it), which replaces
// the old one. kube-proxy uses it only from HNS 15.5 (hnslib ModifyLoadbalancerVersion); the
// emulator reports 13.2, so this serves other callers.
func (h *Service) ModifyLoadBalancer(ctx context.Context, id, settings string) error {
	var doc hcn.HostComputeLoadBalancer
	if err := hcnDecode(settings, &doc, "HostComputeLoadBalancer"); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old, err := h.loadBalancer(id)
	if err != nil {
		return err
	}
	if doc.Id != "" {
		did, err := CanonicalGUID("ID", doc.Id)
		if err != nil {
			return err
		}
		if did != old.doc.Id {
			return hcnErrorf(computenetwork.E_INVALIDARG, "ID: %q is not the load balancer %q being modified", doc.Id, old.doc.Id)
		}
	}
	doc.Id = old.doc.Id
	lb, err := h.validateLoadBalancerLocked(&doc, old.doc.Id)
	if err != nil {
		return err
	}
	h.loadBalancers[old.doc.Id] = lb
	if err := h.applyRulesLocked(); err != nil {
		h.loadBalancers[old.doc.Id] = old
		h.applyRulesLocked()
		return err
	}
	return nil
}

// DeleteLoadBalancer is HcnDeleteLoadBalancer: its rules go with it.
func (h *Service) DeleteLoadBalancer(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	lb, err := h.loadBalancer(id)
	if err != nil {
		return err
	}
	delete(h.loadBalancers, lb.doc.Id)
	log.G(ctx).WithField("loadbalancer", lb.doc.Id).Info("hcsemu: HNS load balancer deleted")
	return h.applyRulesLocked()
}

// EnumerateLoadBalancers is HcnEnumerateLoadBalancers, with the query's Filter as the other
// enumerations take it (hnslib's GetLoadBalancerByID filters on "ID").
func (h *Service) EnumerateLoadBalancers(ctx context.Context, query string) (string, error) {
	q, err := decodeQuery(query)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var docs []any
	for _, id := range sortedKeys(h.loadBalancers) {
		docs = append(docs, h.loadBalancers[id].doc)
	}
	return filterIDs(q, docs, nil)
}

// v1PolicyLists is GET /policylists/: the load balancers as v1 policy lists (kube-proxy only
// checks that the call succeeds, winkernel/supported.go IsCompatible).
func (h *Service) v1PolicyLists() []hcn.PolicyList {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []hcn.PolicyList{}
	for _, id := range sortedKeys(h.loadBalancers) {
		lb := h.loadBalancers[id]
		pl := hcn.PolicyList{ID: id}
		for _, ep := range lb.endpoints {
			pl.EndpointReferences = append(pl.EndpointReferences, "/endpoints/"+ep)
		}
		for _, pm := range lb.doc.PortMappings {
			p := hcn.V1ELBPolicy{Type: "ELB", Protocol: uint16(pm.Protocol), InternalPort: pm.InternalPort, ExternalPort: pm.ExternalPort,
				SourceVIP: lb.doc.SourceVIP, VIPs: lb.doc.FrontendVIPs, ILB: pm.Flags&hcn.LoadBalancerPortMappingFlagsILB != 0,
				DSR: lb.doc.Flags&hcn.LoadBalancerFlagsDSR != 0}
			b, _ := marshalDoc(p)
			pl.Policies = append(pl.Policies, []byte(b))
		}
		out = append(out, pl)
	}
	return out
}

// lbRule is what the dataplane makes of one port mapping of a load balancer: DNAT of
// proto/external at the VIPs (none: the host's addresses) to one of the backends at internal.
type lbRule struct {
	proto    uint32
	external uint16
	internal uint16
	vips     []netip.Addr
	backends []netip.Addr // the endpoints' addresses, in the document's order
	// affinity keeps a client on one backend (DistributionType SourceIP or SourceIPProtocol).
	affinity bool
	// outside: reached from outside the host's networks too (NodePort, externalIPs); a
	// ClusterIP only from the host's networks and the host itself.
	outside bool
	// fromHost: the host's own programs reach it (a VIP, or LocalRoutedVIP for the host's
	// addresses, as kube-proxy sets on NodePorts).
	fromHost bool
	// link is the bridge a VIP is routed to from the host (the first backend's network).
	link string
}

// lbRulesLocked renders the load balancers for the dataplane, and the remote backends (which
// the host routes elsewhere).
func (h *Service) lbRulesLocked() (rules []lbRule, remote []netip.Addr) {
	for _, id := range sortedKeys(h.loadBalancers) {
		lb := h.loadBalancers[id]
		var backends []netip.Addr
		link := ""
		for _, eid := range lb.endpoints {
			ep, ok := h.endpoints[eid]
			if !ok || slices.Contains(backends, ep.ip) {
				continue
			}
			backends = append(backends, ep.ip)
			if link == "" {
				link = ep.network.link
			}
			if ep.remote() && !slices.Contains(remote, ep.ip) {
				remote = append(remote, ep.ip)
			}
		}
		if len(backends) == 0 {
			continue
		}
		for _, pm := range lb.doc.PortMappings {
			rules = append(rules, lbRule{
				proto: pm.Protocol, external: pm.ExternalPort, internal: pm.InternalPort,
				vips: lb.vips, backends: backends, link: link,
				affinity: pm.DistributionType != hcn.LoadBalancerDistributionNone,
				outside:  lb.external(pm),
				fromHost: len(lb.vips) > 0 || pm.Flags&hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP != 0,
			})
		}
	}
	slices.SortFunc(remote, func(a, b netip.Addr) int { return a.Compare(b) })
	return rules, remote
}

// nftDNAT is the nftables statement that sends a connection to one of the backends at port:
// random per connection, or by a hash of the client's address (affinity, as a source-IP
// distribution keeps a client on one backend).
func (r lbRule) nftDNAT() string {
	if len(r.backends) == 1 {
		return fmt.Sprintf("dnat to %s:%d", r.backends[0], r.internal)
	}
	var m []string
	for i, b := range r.backends {
		m = append(m, fmt.Sprintf("%d : %s", i, b))
	}
	pick := "numgen random"
	if r.affinity {
		pick = "jhash ip saddr"
	}
	return fmt.Sprintf("dnat to %s mod %d map { %s } : %d", pick, len(r.backends), strings.Join(m, ", "), r.internal)
}

// nftRules are the rules of r in the emulator's table: chain prerouting for what arrives from
// the host's networks (and, for an external frontend, from anywhere), chain output for the
// host's own programs. bridges are the host's network bridges.
func (r lbRule) nftRules(table string, bridges []string) []string {
	proto := "tcp"
	if r.proto == 17 {
		proto = "udp"
	}
	match := "fib daddr type local"
	if len(r.vips) > 0 {
		var v []string
		for _, a := range r.vips {
			v = append(v, a.String())
		}
		match = "ip daddr { " + strings.Join(v, ", ") + " }"
	}
	port := fmt.Sprintf("%s dport %d", proto, r.external)
	var out []string
	from := ""
	if !r.outside {
		if len(bridges) == 0 {
			return nil
		}
		var q []string
		for _, b := range bridges {
			q = append(q, fmt.Sprintf("%q", b))
		}
		from = "iifname { " + strings.Join(q, ", ") + " } "
	}
	out = append(out, fmt.Sprintf("add rule ip %s prerouting %s%s %s %s", table, from, match, port, r.nftDNAT()))
	if r.fromHost {
		out = append(out, fmt.Sprintf("add rule ip %s output ip daddr != 127.0.0.0/8 %s %s %s", table, match, port, r.nftDNAT()))
	}
	return out
}
