package hns

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// DNS inside containers. On Windows the DNS settings of an HNS endpoint (HCN v2 Dns: Domain,
// Search, ServerList, Options; HNS v1 DNSDomain, DNSSuffix, DNSServerList) become the settings
// of the container's network adapter for that endpoint, which ipconfig /all shows ("DNS Servers",
// "Connection-specific DNS Suffix") and the DNS client uses. CNI plugins put the pod's DNS
// config there: win-bridge (containernetworking/plugins pkg/hns) writes runtimeConfig dns
// servers and searches into ServerList and Search (v2) or DNSServerList and DNSSuffix (v1,
// comma-separated), and containerd's CRI passes a pod's dns_config as that runtimeConfig.
//
// The emulator's convention: hcsemu writes those settings into the container's C:\etc\resolv.conf
// (ResolvConfFile) when the container starts and when an endpoint joins or leaves it, so that a
// Linux workload's resolver (which reads /etc/resolv.conf in its chroot) follows them, and the
// test workload's ipconfig stand-in prints them. Per adapter, a comment line
//
//	# hcsemu-adapter <MAC as HNS spells it> suffix=<suffix> servers=<server>,<server>
//
// records what Windows shows on that adapter; then come the resolver's lines:
//
//   - nameserver: every adapter's servers, in adapter order, each once.
//   - search: the container document's Networking.DnsSearchList (the spec's
//     windows.network.DNSSearchList; Windows' global suffix search list, whose suffixes are all
//     applied, in order: assumption, as the "DNS Suffix Search List" group policy does), else the
//     first adapter's connection-specific suffix only (its Domain, else the first of its Search).
//     Windows applies one DNS suffix, the pod namespace's: "On Windows, you can only have 1 DNS
//     suffix, which is the DNS suffix associated with that Pod's namespace (for example,
//     mydns.svc.cluster.local)"; kubernetes.default.svc.cluster.local and kubernetes resolve,
//     kubernetes.default does not (Kubernetes docs, "Networking on Windows", DNS limitations).
//   - options ndots:1: Windows "treats all names with a . as a FQDN" (Kubernetes docs, "DNS for
//     Services and Pods", DNS resolution on Windows nodes), so a dotted name is asked as given
//     first; a single label gets the suffix. The endpoint's Options (a pod's ndots:8, say) are
//     not applied: the Windows resolver has no such options, and win-bridge drops a runtime's
//     options anyway (it takes servers and searches only, RuntimeDNS).
//
// A container in no network (no namespace, no adapters, no VM) gets no file.

// ResolvConfFile is where hcsemu writes a container's resolver configuration.
const ResolvConfFile = `C:\etc\resolv.conf`

// AdapterDNS is one network adapter of a container as DNS sees it: its endpoint's MAC address
// and Dns settings.
type AdapterDNS struct {
	mac string
	dns hcn.Dns
}

// suffix is the adapter's connection-specific DNS suffix: its Domain, else the first of its
// search suffixes (win-bridge sets only Search from a pod's dns_config).
func (a AdapterDNS) suffix() string {
	if a.dns.Domain != "" {
		return a.dns.Domain
	}
	if len(a.dns.Search) > 0 {
		return a.dns.Search[0]
	}
	return ""
}

// validateDNS checks an endpoint's (or network's) Dns; field prefixes the fields named in
// errors ("Dns", "Settings"). Assumptions (HNS documents no checks): a server that is not an IP
// address is HCN_E_INVALID_IP, as for the other addresses of a document; an empty suffix, or one
// with white space or a comma (the separator of v1's lists), or an empty option or one with a
// line break, is E_INVALIDARG.
func validateDNS(field string, d hcn.Dns) error {
	for i, s := range d.ServerList {
		if _, err := netip.ParseAddr(s); err != nil {
			return hcnErrorf(computenetwork.HCN_E_INVALID_IP, "%s.ServerList[%d]: %q is not an IP address", field, i, s)
		}
	}
	if d.Domain != "" {
		if err := checkSuffix(field+".Domain", d.Domain); err != nil {
			return err
		}
	}
	for i, s := range d.Search {
		if err := checkSuffix(fmt.Sprintf("%s.Search[%d]", field, i), s); err != nil {
			return err
		}
	}
	for i, o := range d.Options {
		if strings.TrimSpace(o) == "" || strings.ContainsAny(o, "\r\n") {
			return hcnErrorf(computenetwork.E_INVALIDARG, "%s.Options[%d]: %q is not a resolver option", field, i, o)
		}
	}
	return nil
}

func checkSuffix(field, s string) error {
	if s == "" || len(s) > 255 || strings.ContainsAny(s, " \t\r\n,;") {
		return hcnErrorf(computenetwork.E_INVALIDARG, "%s: %q is not a DNS suffix", field, s)
	}
	return nil
}

// splitList splits one of v1's comma-separated lists, dropping empty entries and spaces.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// resolvConf is the text of ResolvConfFile for a container with these adapters and the
// document's Networking.DnsSearchList (comma-separated, may be empty).
func ResolvConf(adapters []AdapterDNS, searchList string) string {
	var b strings.Builder
	b.WriteString("# " + ResolvConfFile + ": written by hcsemu (the emulator's convention) from the DNS settings\n" +
		"# of the container's network adapters, which Windows keeps on the adapters. Windows applies\n" +
		"# one DNS suffix and takes a name with a dot as fully qualified: hence one search suffix and\n" +
		"# ndots:1 (internal/hcsemu/hns dns.go).\n")
	var servers []string
	for _, a := range adapters {
		fmt.Fprintf(&b, "# hcsemu-adapter %s suffix=%s servers=%s\n", a.mac, a.suffix(), strings.Join(a.dns.ServerList, ","))
		for _, s := range a.dns.ServerList {
			if !slices.Contains(servers, s) {
				servers = append(servers, s)
			}
		}
	}
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	search := splitList(searchList)
	if len(search) == 0 {
		for _, a := range adapters {
			if s := a.suffix(); s != "" {
				search = []string{s}
				break
			}
		}
	}
	if len(search) > 0 {
		b.WriteString("search " + strings.Join(search, " ") + "\n")
	}
	b.WriteString("options ndots:1\n")
	return b.String()
}
