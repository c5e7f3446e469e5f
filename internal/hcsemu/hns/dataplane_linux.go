package hns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/containerd/log"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// linuxNet is the HNS dataplane on Linux. Everything lives in network namespaces the daemon
// makes and names by files under <root>/netns, bind mounts of the namespaces as `ip netns`
// makes them (usable with `nsenter --net=FILE` or `hcsemu hostns`):
//
//   - <root>/netns/host plays the Windows host's own network: every HNS network is a Linux
//     bridge there (hns<first 8 hex digits of its id>) carrying the network's gateway address,
//     so the host reaches endpoints as a Windows host does through its vSwitch; IP forwarding
//     is on, and the NAT rules of port mappings and outbound NAT are an nftables table
//     (ip hcsemu) there. A port mapping answers other endpoints at the host's addresses, and
//     the host's own programs only as Windows does for the network type and host build
//     (objects.go hostReachOf: a NAT network's also at 127.0.0.1 from 1809, an L2Bridge network's
//     only with LocalRoutedVip). Nothing in it routes anywhere else: its only other interface
//     is one a caller may add to link it to a namespace of its own (test/cluster's
//     control-plane network, the node's "physical" NIC), never to the machine's network.
//   - <root>/netns/<namespace id> is an HNS namespace (a compartment): loopback, and for each
//     endpoint added to it one end of a veth pair (eth0, eth1, …) with the endpoint's address,
//     MAC and routes; the other end (hep<8 hex digits of the endpoint id>) is a port of its
//     network's bridge in the host namespace.
//
// The machine's own network namespace is never touched.
type linuxNet struct {
	dir      string // <root>/netns
	hostPath string
	host     *netlink.Handle
	nft      string // the nft binary, or "" if not installed
	madeNFT  bool   // the nftables table exists
	// vipRoutes are the routes of load balancers' VIPs in the host namespace, by VIP: the
	// bridge each goes to (setVIPRoutes).
	vipRoutes map[netip.Addr]string
}

// HostNetnsPath is the file of the emulated host's network namespace of the daemon using root.
func HostNetnsPath(root string) string { return layout.HostNetns(root) }

// New starts the HNS of the daemon using root, whose emulated host runs Windows build build:
// it removes what a dead daemon of root left, then makes the emulated host's network namespace.
func New(ctx context.Context, root string, build uint32) (*Service, error) {
	dp, err := newLinuxNet(ctx, root)
	if err != nil {
		return nil, err
	}
	return newService(dp, build), nil
}

func newLinuxNet(ctx context.Context, root string) (_ *linuxNet, retErr error) {
	dir := layout.NetnsDir(root)
	// A daemon that died left its namespaces mounted (its processes died with it); remove
	// them before anything else, so the new daemon starts clean (see objects.go: clean, not
	// persist).
	removeStaleNetns(ctx, dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &linuxNet{dir: dir, hostPath: layout.HostNetns(root)}
	if p, err := exec.LookPath("nft"); err == nil {
		l.nft = p
	}
	if err := NewNetnsFile(l.hostPath); err != nil {
		return nil, fmt.Errorf("create the emulated host's network namespace: %w", err)
	}
	defer func() {
		if retErr != nil {
			l.close()
		}
	}()
	ns, err := netns.GetFromPath(l.hostPath)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if l.host, err = netlink.NewHandleAt(ns); err != nil {
		return nil, err
	}
	if err := setLoopbackUp(l.host); err != nil {
		return nil, err
	}
	// The host routes between its networks (and back to endpoints for port mappings), and
	// lets a connection to 127.0.0.1 that a port mapping redirects leave loopback
	// (route_localnet; Linux drops such packets otherwise): WinNAT maps localhost from 1809.
	if err := InNetns(l.hostPath, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		return os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1"), 0o644)
	}); err != nil {
		return nil, fmt.Errorf("enable forwarding in the emulated host: %w", err)
	}
	return l, nil
}

func setLoopbackUp(h *netlink.Handle) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(lo)
}

// removeStaleNetns unmounts and removes every namespace file under dir.
func removeStaleNetns(ctx context.Context, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := RemoveNetnsFile(p); err != nil {
			log.G(ctx).WithError(err).WithField("path", p).Warn("hcsemu: cannot remove a network namespace a previous daemon left")
		} else {
			log.G(ctx).WithField("path", p).Info("hcsemu: removed a network namespace a previous daemon left")
		}
	}
}

// NewNetnsFile makes a new network namespace and bind-mounts it at path, which must not exist
// (as `ip netns add` does; usable with `nsenter --net=PATH`). Its loopback is down. The
// namespace is made on a thread of its own, which goes back to the daemon's
// namespace afterwards (or, if it cannot, ends with its goroutine).
func NewNetnsFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		err = unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
		if err == nil {
			if perr := allowPing(); perr != nil {
				// The namespace works without it; only accounts without CAP_NET_RAW cannot ping.
				log.L.WithError(perr).WithField("netns", path).Warn("hcsemu: non-administrator accounts cannot ping in this namespace")
			}
		}
		if serr := netns.Set(orig); serr != nil {
			// The thread stays locked and ends with this goroutine.
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		unix.Unmount(path, unix.MNT_DETACH)
		os.Remove(path)
		return err
	}
	return nil
}

// pingGroupRange lets every group open datagram ICMP sockets (icmp(7), ping_group_range):
// Windows lets any user send ICMP echo requests (ping.exe, IcmpSendEcho need no privilege),
// Linux only the groups in this range (by default none), so a container's non-administrator
// accounts could not ping without it.
const pingGroupRange = "0 2147483647"

// allowPing sets the network namespace of the calling thread's ping_group_range (the
// namespace is the opener's: a thread inside a namespace writes that namespace's value).
func allowPing() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte(pingGroupRange), 0o644); err != nil {
		return fmt.Errorf("let every group ping (net.ipv4.ping_group_range): %w", err)
	}
	return nil
}

// RemoveNetnsFile unmounts and removes a namespace file made by NewNetnsFile; a missing one is
// not an error. The namespace itself goes when its last user (a process, an open descriptor)
// does.
func RemoveNetnsFile(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// InNetns runs fn on a thread inside the network namespace bound at path: sockets fn makes
// stay in that namespace.
func InNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

func shortID(id string) string { return strings.ReplaceAll(id, "-", "")[:8] }

func (l *linuxNet) addNetwork(n *hnsNetwork) error {
	name := "hns" + shortID(n.doc.Id)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := l.host.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", name, err)
	}
	err := l.host.AddrAdd(br, &netlink.Addr{IPNet: ipNet(n.gateway, n.subnet.Bits())})
	if err == nil {
		err = l.host.LinkSetUp(br)
	}
	if err != nil {
		l.host.LinkDel(br)
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	n.link = name
	return nil
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, a.BitLen())}
}

func (l *linuxNet) delNetwork(n *hnsNetwork) error {
	if n.link == "" {
		return nil
	}
	link, err := l.host.LinkByName(n.link)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return l.host.LinkDel(link)
}

func (l *linuxNet) addNamespace(ns *hnsNamespace) error {
	p := filepath.Join(l.dir, ns.doc.Id) // layout.NamespaceNetns
	if err := NewNetnsFile(p); err != nil {
		return err
	}
	err := withHandle(p, setLoopbackUp)
	if err != nil {
		RemoveNetnsFile(p)
		return err
	}
	ns.path = p
	return nil
}

func withHandle(path string, fn func(*netlink.Handle) error) error {
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

func (l *linuxNet) delNamespace(ns *hnsNamespace) error {
	if ns.path == "" {
		return nil
	}
	return RemoveNetnsFile(ns.path)
}

func (l *linuxNet) netnsPath(ns *hnsNamespace) string { return ns.path }

func (l *linuxNet) attach(ep *hnsEndpoint, ns *hnsNamespace, index int) error {
	br, err := l.host.LinkByName(ep.network.link)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", ep.network.link, err)
	}
	nsh, err := netns.GetFromPath(ns.path)
	if err != nil {
		return err
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return err
	}
	defer h.Close()
	hostName, tmpName := "hep"+shortID(ep.doc.Id), "hnt"+shortID(ep.doc.Id)
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: hostName, MasterIndex: br.Attrs().Index},
		PeerName:         tmpName,
		PeerHardwareAddr: ep.mac,
		PeerNamespace:    netlink.NsFd(int(nsh)),
	}
	if err := l.host.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", hostName, err)
	}
	fail := func(err error) error {
		if link, lerr := l.host.LinkByName(hostName); lerr == nil {
			l.host.LinkDel(link)
		}
		return err
	}
	peer, err := h.LinkByName(tmpName)
	if err != nil {
		return fail(err)
	}
	name := ""
	for i := 0; name == ""; i++ {
		if _, err := h.LinkByName(fmt.Sprintf("eth%d", i)); err != nil {
			name = fmt.Sprintf("eth%d", i)
		}
	}
	if err := h.LinkSetName(peer, name); err != nil {
		return fail(fmt.Errorf("rename %s to %s: %w", tmpName, name, err))
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: ipNet(ep.ip, ep.prefix)}); err != nil {
		return fail(fmt.Errorf("address %s/%d: %w", ep.ip, ep.prefix, err))
	}
	if err := h.LinkSetUp(peer); err != nil {
		return fail(err)
	}
	for i, r := range ep.routes {
		dst, _ := netip.ParsePrefix(r.DestinationPrefix)
		rt := netlink.Route{LinkIndex: peer.Attrs().Index, Priority: int(r.Metric) + 100*index}
		if dst.Bits() > 0 {
			rt.Dst = ipNet(dst.Masked().Addr(), dst.Bits())
		}
		if r.NextHop != "" {
			hop, _ := netip.ParseAddr(r.NextHop)
			rt.Gw = net.IP(hop.AsSlice())
		} else {
			rt.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteAdd(&rt); err != nil {
			return fail(fmt.Errorf("route %d of the endpoint (Routes[%d], %s via %q): %w", i, i, r.DestinationPrefix, r.NextHop, err))
		}
	}
	hostEnd, err := l.host.LinkByName(hostName)
	if err == nil {
		err = l.host.LinkSetUp(hostEnd)
	}
	if err != nil {
		return fail(err)
	}
	ep.hostLink = hostName
	return nil
}

func (l *linuxNet) detach(ep *hnsEndpoint) error {
	if ep.hostLink == "" {
		return nil
	}
	name := ep.hostLink
	ep.hostLink = ""
	link, err := l.host.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return l.host.LinkDel(link) // removes the pair
}

// counters reads the host end of the endpoint's veth pair (in a namespace or a VM's NIC): what
// the host end sent, the endpoint received, and the other way round.
func (l *linuxNet) counters(ep *hnsEndpoint) (hcn.EndpointStats, error) {
	if ep.hostLink == "" {
		return hcn.EndpointStats{}, nil
	}
	link, err := l.host.LinkByName(ep.hostLink)
	if err != nil {
		return hcn.EndpointStats{}, err
	}
	c := link.Attrs().Statistics
	if c == nil {
		return hcn.EndpointStats{}, fmt.Errorf("link %s has no statistics", ep.hostLink)
	}
	return hcn.EndpointStats{
		BytesReceived: c.TxBytes, PacketsReceived: c.TxPackets, DroppedPacketsIncoming: c.TxDropped,
		BytesSent: c.RxBytes, PacketsSent: c.RxPackets, DroppedPacketsOutgoing: c.RxDropped,
	}, nil
}

// nftTable is the emulator's nftables table in the host namespace.
const nftTable = "hcsemu"

// setRules renders the whole table from the objects and loads it in one transaction.
func (l *linuxNet) setRules(networks []*hnsNetwork, endpoints []*hnsEndpoint, lbs []lbRule, remote []netip.Addr) error {
	var rules []string
	var bridges []string
	for _, n := range networks {
		bridges = append(bridges, n.link)
	}
	// Load balancers (loadbalancer.go): DNAT of their frontends to their backends.
	for _, r := range lbs {
		rules = append(rules, r.nftRules(nftTable, bridges)...)
	}
	for _, ep := range endpoints {
		if ep.remote() {
			continue
		}
		for _, pm := range ep.ports {
			proto := "tcp"
			if pm.proto == 17 {
				proto = "udp"
			}
			match := "fib daddr type local"
			if pm.vip.IsValid() {
				match = "ip daddr " + pm.vip.String()
			}
			to := fmt.Sprintf("%s dport %d dnat to %s:%d", proto, pm.external, ep.ip, pm.internal)
			// From the host's networks (other endpoints, the outside) at the host's addresses.
			rules = append(rules, fmt.Sprintf("add rule ip %s prerouting %s %s", nftTable, match, to))
			// From programs of the host itself only as Windows maps them (hostReachOf): at
			// its addresses, also at 127.0.0.1 (WinNAT from 1809), or not at all.
			switch pm.fromHost {
			case reachAddresses:
				rules = append(rules, fmt.Sprintf("add rule ip %s output ip daddr != 127.0.0.0/8 %s %s", nftTable, match, to))
			case reachLoopback:
				rules = append(rules, fmt.Sprintf("add rule ip %s output %s %s", nftTable, match, to))
			}
		}
		if ep.outboundNAT != nil {
			r := fmt.Sprintf("add rule ip %s postrouting ip saddr %s oifname != %q", nftTable, ep.ip, ep.network.link)
			if len(*ep.outboundNAT) > 0 {
				var ex []string
				for _, p := range *ep.outboundNAT {
					ex = append(ex, p.String())
				}
				r += fmt.Sprintf(" ip daddr != { %s }", strings.Join(ex, ", "))
			}
			rules = append(rules, r+" masquerade")
		}
	}
	if len(remote) > 0 {
		// A connection a load balancer sends to a remote endpoint (a backend on another
		// node) from a client outside the host's networks (a NodePort reached from another
		// node) leaves with the host's address, so the answer comes back through the host
		// that translated it; the host's own pods keep their addresses, which the other
		// nodes route back here.
		var r, local []string
		for _, a := range remote {
			r = append(r, a.String())
		}
		for _, n := range networks {
			local = append(local, n.subnet.String())
		}
		rule := fmt.Sprintf("add rule ip %s postrouting ct status dnat ip daddr { %s }", nftTable, strings.Join(r, ", "))
		if len(local) > 0 {
			rule += fmt.Sprintf(" ip saddr != { %s }", strings.Join(local, ", "))
		}
		rules = append(rules, rule+" masquerade")
	}
	for _, n := range networks {
		// Hairpin: an endpoint reaching another of its network through a host port mapping
		// gets its answer back through the host.
		rules = append(rules, fmt.Sprintf("add rule ip %s postrouting ct status dnat ip saddr %s oifname %q masquerade", nftTable, n.subnet, n.link))
		// A host program's connection to 127.0.0.1 at a mapped port (reachLoopback) leaves
		// with the host's address on the network, so the endpoint's answer comes back.
		rules = append(rules, fmt.Sprintf("add rule ip %s postrouting ct status dnat ip saddr 127.0.0.0/8 oifname %q masquerade", nftTable, n.link))
		if n.doc.Type == "NAT" {
			// WinNAT: what leaves a NAT network's subnet carries the host's address.
			rules = append(rules, fmt.Sprintf("add rule ip %s postrouting ip saddr %s oifname != %q masquerade", nftTable, n.subnet, n.link))
		}
	}
	if err := l.setVIPRoutes(lbs); err != nil {
		return err
	}
	if len(rules) == 0 && !l.madeNFT {
		return nil
	}
	if l.nft == "" {
		return fmt.Errorf("nft (Debian package nftables) is not installed; the emulator needs it for NAT and port mappings (hack/deps.sh installs it)")
	}
	script := strings.Join(append([]string{
		"add table ip " + nftTable,
		"flush table ip " + nftTable,
		// Numeric priorities: dstnat/srcnat are not accepted by every nft for every hook.
		fmt.Sprintf("add chain ip %s prerouting { type nat hook prerouting priority -100; }", nftTable),
		fmt.Sprintf("add chain ip %s output { type nat hook output priority -100; }", nftTable),
		fmt.Sprintf("add chain ip %s postrouting { type nat hook postrouting priority 100; }", nftTable),
	}, rules...), "\n") + "\n"
	cmd := exec.Command("nsenter", "--net="+l.hostPath, l.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %v: %s", err, strings.TrimSpace(out.String()))
	}
	l.madeNFT = true
	return nil
}

// setVIPRoutes routes every load balancer VIP from the emulated host to the bridge of its
// first backend's network, so that the host's own programs reach a ClusterIP (a connect to
// an address without a route fails before the output chain's DNAT sees it); routes of VIPs no
// load balancer has any more are removed. The host's source address is then the bridge's
// (the network's gateway), to which the backend answers.
func (l *linuxNet) setVIPRoutes(lbs []lbRule) error {
	want := map[netip.Addr]string{}
	for _, r := range lbs {
		for _, v := range r.vips {
			if _, ok := want[v]; !ok && r.link != "" {
				want[v] = r.link
			}
		}
	}
	for v, link := range l.vipRoutes {
		if want[v] == link {
			continue
		}
		// The route went with its bridge if that is gone.
		if br, err := l.host.LinkByName(link); err == nil {
			rt := netlink.Route{Dst: ipNet(v, 32), LinkIndex: br.Attrs().Index, Scope: netlink.SCOPE_LINK}
			if err := l.host.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("remove the route of VIP %s: %w", v, err)
			}
		}
		delete(l.vipRoutes, v)
	}
	for v, link := range want {
		if l.vipRoutes[v] == link {
			continue
		}
		br, err := l.host.LinkByName(link)
		if err != nil {
			return fmt.Errorf("route VIP %s to %s: %w", v, link, err)
		}
		rt := netlink.Route{Dst: ipNet(v, 32), LinkIndex: br.Attrs().Index, Scope: netlink.SCOPE_LINK}
		if err := l.host.RouteReplace(&rt); err != nil {
			return fmt.Errorf("route VIP %s to %s: %w", v, link, err)
		}
		if l.vipRoutes == nil {
			l.vipRoutes = map[netip.Addr]string{}
		}
		l.vipRoutes[v] = link
	}
	return nil
}

// close removes the host namespace and the folder; the namespaces of HNS namespaces were
// removed by the caller (Service.close), and anything left is removed here too.
func (l *linuxNet) close() error {
	if l.host != nil {
		l.host.Close()
	}
	removeStaleNetns(context.Background(), l.dir)
	if err := os.Remove(l.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// InHostNetns runs fn on a thread in the emulated host's network namespace of the daemon using
// root: sockets fn makes stay in that namespace (the emulated Windows node's listeners).
func InHostNetns(root string, fn func() error) error { return InNetns(HostNetnsPath(root), fn) }

// ExecInHostNetns replaces the calling program with argv run in the emulated host's network
// namespace of the daemon using root (`hcsemu hostns`). It returns only on failure.
func ExecInHostNetns(root string, argv []string) error {
	if _, err := os.Stat(HostNetnsPath(root)); err != nil {
		return fmt.Errorf("the emulated host's network namespace (is hcsemu running with --root %s?): %w", root, err)
	}
	return ExecInNetns(HostNetnsPath(root), argv)
}

// ExecInNetns replaces the calling program with argv run in the network namespace bound at
// path. It returns only on failure.
func ExecInNetns(path string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no program to run")
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	// The namespace is the calling thread's; execve keeps it for the new program.
	runtime.LockOSThread()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w", path, err)
	}
	return unix.Exec(prog, argv, os.Environ())
}

// SetLoopbackUp brings up the loopback interface of the network namespace bound at path, as
// every namespace the emulator makes has it.
func SetLoopbackUp(path string) error { return withHandle(path, setLoopbackUp) }
