package hns

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The load-balancer part of the contract suite: what kube-proxy's winkernel proxier does with
// HNS (docs/notes/kube-proxy-hns.md): remote endpoints for backends on other nodes,
// load balancers for ClusterIPs and NodePorts, and the traffic they carry.

func l2bridgeNetwork(name, subnet, gw string) *hcn.HostComputeNetwork {
	n := natNetwork(name, subnet, gw)
	n.Type = hcn.L2Bridge
	return n
}

func endpointAt(t *testing.T, c *Client, networkID, ip string, flags uint32) *hcn.HostComputeEndpoint {
	t.Helper()
	ep, err := c.CreateEndpoint(ctx(t), networkID, &hcn.HostComputeEndpoint{
		IpConfigurations: []hcn.IpConfig{{IpAddress: ip}}, Flags: flags,
	})
	if err != nil {
		t.Fatalf("create endpoint %s: %v", ip, err)
	}
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	return ep
}

// podAt makes a pod for one test: a namespace with an endpoint at ip on the network. It returns
// "<namespace id> <endpoint id>".
func podAt(t *testing.T, c *Client, networkID, ip string) string {
	t.Helper()
	ep := endpointAt(t, c, networkID, ip, 0)
	ns, err := c.CreateNamespace(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteNamespace(context.Background(), ns.Id) })
	if err := c.AddNamespaceEndpoint(ctx(t), ns.Id, ep.Id); err != nil {
		t.Fatal(err)
	}
	return ns.Id + " " + ep.Id
}

// clusterIP is a load balancer as kube-proxy makes one for a ClusterIP Service
// (winkernel/hns.go getLoadBalancer).
func clusterIP(vip string, port, target uint16, endpoints ...string) *hcn.HostComputeLoadBalancer {
	return &hcn.HostComputeLoadBalancer{
		HostComputeEndpoints: endpoints,
		FrontendVIPs:         []string{vip},
		PortMappings:         []hcn.LoadBalancerPortMapping{{Protocol: 6, InternalPort: target, ExternalPort: port}},
	}
}

// nodePort is a load balancer as kube-proxy makes one for a NodePort: no VIP, LocalRoutedVIP
// and VipExternalIP.
func nodePort(port, target uint16, endpoints ...string) *hcn.HostComputeLoadBalancer {
	return &hcn.HostComputeLoadBalancer{
		HostComputeEndpoints: endpoints,
		PortMappings: []hcn.LoadBalancerPortMapping{{Protocol: 6, InternalPort: target, ExternalPort: port,
			Flags: hcn.LoadBalancerPortMappingFlagsLocalRoutedVIP | hcn.LoadBalancerPortMappingFlagsVipExternalIP}},
	}
}

func TestContractLoadBalancers(t *testing.T) {
	c := requireContract(t)
	n := network(t, c, l2bridgeNetwork("contract-lb", "10.251.31.0/24", "10.251.31.1"))
	a := endpointAt(t, c, n.Id, "10.251.31.11", 0)
	// A backend on another node: a remote endpoint with that pod's address, outside this
	// node's subnet, as kube-proxy creates it on L2Bridge.
	remote := endpointAt(t, c, n.Id, "10.251.32.11", hcn.EndpointFlagsRemoteEndpoint)
	if remote.Flags&hcn.EndpointFlagsRemoteEndpoint == 0 || remote.IpConfigurations[0].IpAddress != "10.251.32.11" {
		t.Errorf("remote endpoint %+v", remote)
	}
	if of, err := c.ListEndpoints(ctx(t), Filter{"VirtualNetwork": n.Id}); err != nil || len(of) != 2 {
		t.Errorf("endpoints of the network (kube-proxy's ListEndpointsOfNetwork): %d, %v", len(of), err)
	}

	lb, err := c.CreateLoadBalancer(ctx(t), clusterIP("10.251.131.10", 80, 8080, a.Id, remote.Id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteLoadBalancer(context.Background(), lb.Id) })
	if lb.Id == "" || !slices.Equal(lb.HostComputeEndpoints, []string{a.Id, remote.Id}) || lb.FrontendVIPs[0] != "10.251.131.10" ||
		lb.PortMappings[0].ExternalPort != 80 || lb.SchemaVersion != hcn.V2 {
		t.Errorf("created %+v", lb)
	}
	got, err := c.GetLoadBalancer(ctx(t), lb.Id)
	if err != nil || got.Id != lb.Id || got.PortMappings[0].InternalPort != 8080 {
		t.Errorf("get: %+v, %v", got, err)
	}
	// hnslib's GetLoadBalancerByID: an enumeration filtered on ID.
	byID, err := c.ListLoadBalancers(ctx(t), Filter{"ID": strings.ToUpper(lb.Id)})
	if err != nil || len(byID) != 1 || byID[0].Id != lb.Id {
		t.Errorf("list by ID: %+v, %v", byID, err)
	}
	// The same frontend again is HCN_E_PORT_ALREADY_EXISTS (kube-proxy then replaces it).
	_, err = c.CreateLoadBalancer(ctx(t), clusterIP("10.251.131.10", 80, 9090, a.Id))
	wantHR(t, err, computenetwork.HCN_E_PORT_ALREADY_EXISTS, "PortMappings[0].ExternalPort")
	// Update replaces the document (hnslib's Update).
	if err := c.UpdateLoadBalancer(ctx(t), lb.Id, clusterIP("10.251.131.10", 80, 8080, a.Id)); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetLoadBalancer(ctx(t), lb.Id); len(got.HostComputeEndpoints) != 1 {
		t.Errorf("after update: %+v", got)
	}

	before, _ := c.ListLoadBalancers(ctx(t), nil)
	for _, tc := range []struct {
		name  string
		lb    *hcn.HostComputeLoadBalancer
		hr    computenetwork.HRESULT
		field string
	}{
		{"unknown endpoint", clusterIP("10.251.131.11", 80, 8080, "0b0e5f3c-1111-4222-8333-944455556666"), computenetwork.HCN_E_ENDPOINT_NOT_FOUND, "HostComputeEndpoints[0]"},
		{"no endpoint", clusterIP("10.251.131.11", 80, 8080), computenetwork.E_INVALIDARG, "HostComputeEndpoints"},
		{"bad VIP", clusterIP("10.251.131.300", 80, 8080, a.Id), computenetwork.HCN_E_INVALID_IP, "FrontendVIPs[0]"},
		{"bad protocol", func() *hcn.HostComputeLoadBalancer {
			l := clusterIP("10.251.131.11", 80, 8080, a.Id)
			l.PortMappings[0].Protocol = 1
			return l
		}(), computenetwork.HCN_E_INVALID_POLICY, "PortMappings[0].Protocol"},
		{"no internal port", clusterIP("10.251.131.11", 80, 0, a.Id), computenetwork.HCN_E_INVALID_INTERNAL_PORT, "PortMappings[0].InternalPort"},
		{"no external port", clusterIP("10.251.131.11", 0, 8080, a.Id), computenetwork.HCN_E_INVALID_POLICY, "PortMappings[0].ExternalPort"},
		{"bad source VIP", func() *hcn.HostComputeLoadBalancer {
			l := clusterIP("10.251.131.11", 80, 8080, a.Id)
			l.SourceVIP = "10.251.31"
			return l
		}(), computenetwork.HCN_E_INVALID_IP, "SourceVIP"},
		{"IPv6", func() *hcn.HostComputeLoadBalancer {
			l := clusterIP("10.251.131.11", 80, 8080, a.Id)
			l.Flags = hcn.LoadBalancerFlagsIPv6
			return l
		}(), computenetwork.E_NOTIMPL, "Flags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateLoadBalancer(ctx(t), tc.lb)
			wantHR(t, err, tc.hr, tc.field)
		})
	}
	if after, _ := c.ListLoadBalancers(ctx(t), nil); len(after) != len(before) {
		t.Errorf("refused creates changed the load balancers: %d before, %d after", len(before), len(after))
	}

	if err := c.DeleteLoadBalancer(ctx(t), lb.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLoadBalancer(ctx(t), lb.Id); !IsNotFound(err) {
		t.Errorf("get after delete: %v, want not found", err)
	}
	if byID, err := c.ListLoadBalancers(ctx(t), Filter{"ID": lb.Id}); err != nil || len(byID) != 0 {
		t.Errorf("list by ID after delete: %+v, %v", byID, err)
	}
	// kube-proxy's start-up check (winkernel/supported.go): GET /policylists/ succeeds.
	if _, err := c.HNSCall(ctx(t), "GET", "/policylists/", nil); err != nil {
		t.Errorf("GET /policylists/: %v", err)
	}
}

// TestContractLoadBalancerTraffic: a ClusterIP reached from a pod and from the host spreads over
// its three backends, one with source-IP affinity keeps a client on one backend, a NodePort
// answers at the host's address, and deleting the load balancers leaves no rule and no route.
func TestContractLoadBalancerTraffic(t *testing.T) {
	c := requireContract(t)
	run, root, workload := emulatedHost(t)
	n := network(t, c, l2bridgeNetwork("contract-lb-traffic", "10.251.33.0/24", "10.251.33.1"))
	pod := func(ip string) string { return podAt(t, c, n.Id, ip) }
	var backendNS, backendEP []string
	for i := 1; i <= 3; i++ {
		f := strings.Fields(pod(fmt.Sprintf("10.251.33.%d", 10+i)))
		backendNS, backendEP = append(backendNS, f[0]), append(backendEP, f[1])
	}
	client := strings.Fields(pod("10.251.33.20"))[0]
	// A fourth backend stands for a pod on another node: it is on a network of its own
	// (another subnet, which the host routes to), and the first network knows it as a remote
	// endpoint with its address, as kube-proxy creates it.
	other := network(t, c, l2bridgeNetwork("contract-lb-other", "10.251.34.0/24", "10.251.34.1"))
	far := strings.Fields(podAt(t, c, other.Id, "10.251.34.11"))[0]
	backendNS = append(backendNS, far)
	remote := endpointAt(t, c, n.Id, "10.251.34.11", hcn.EndpointFlagsRemoteEndpoint)

	const env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; "
	netns := func(id string) string { return root + "/netns/" + id }
	// The backends: HTTP servers answering their names, started in their namespaces, waited
	// for until they listen, killed at the end.
	script := env + "d=$(mktemp -d /tmp/hns-lb-contract.XXXXXX) && echo $d\n"
	for i, ns := range backendNS {
		script += fmt.Sprintf("nsenter --net=%s %s http 0.0.0.0:8080 backend-%d </dev/null >$d/%d.out 2>&1 & echo $! >>$d/pids\n", netns(ns), workload, i+1, i+1)
		script += fmt.Sprintf("nsenter --net=%s %s udp 0.0.0.0:5353 backend-%d </dev/null >$d/%d.udp.out 2>&1 & echo $! >>$d/pids\n", netns(ns), workload, i+1, i+1)
	}
	script += "for f in 1 2 3 4 1.udp 2.udp 3.udp 4.udp; do i=0; until grep -q listening $d/$f.out; do i=$((i+1)); [ $i -lt 600 ] || { cat $d/$f.out; exit 1; }; sleep 0.1; done; done\n"
	out, err := run(script)
	if err != nil {
		t.Fatalf("start the backends: %v", err)
	}
	dir := strings.TrimSpace(strings.Split(out, "\n")[0])
	t.Cleanup(func() { run(env + "kill $(cat " + dir + "/pids); rm -rf " + dir) })

	// get asks ADDRESS:PORT times times from the namespace file (the host's: "") and returns
	// the distinct answers, sorted.
	get := func(from, address string, port, times int) ([]string, error) {
		enter := ""
		if from != "" {
			enter = "nsenter --net=" + from + " "
		}
		req := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3`, address, port)
		// timeout bounds a connection that is never answered; the first failure ends the loop,
		// so that a broken frontend fails the test at once. The test asserts only the answers.
		s := fmt.Sprintf("%sfor i in $(seq %d); do a=$(%stimeout 10 bash -c \"%s\") || break; echo \"$a\" | tail -n 1; done", env, times, enter, req)
		out, err := run(s)
		var seen []string
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(seen, l) {
				seen = append(seen, l)
			}
		}
		slices.Sort(seen)
		return seen, err
	}
	all := []string{"backend-1", "backend-2", "backend-3"}
	// getUDP is get for a UDP frontend: one datagram from a new socket each time, one answer.
	getUDP := func(from, address string, port, times int) ([]string, error) {
		enter := ""
		if from != "" {
			enter = "nsenter --net=" + from + " "
		}
		// timeout bounds a lost answer, and the first one ends the loop (as in get).
		req := fmt.Sprintf(`exec 3<>/dev/udp/%s/%d && printf q >&3 && head -n 1 <&3`, address, port)
		s := fmt.Sprintf("%sfor i in $(seq %d); do %stimeout 10 bash -c \"%s\" || break; done", env, times, enter, req)
		out, err := run(s)
		var seen []string
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(seen, l) {
				seen = append(seen, l)
			}
		}
		slices.Sort(seen)
		return seen, err
	}

	lb, err := c.CreateLoadBalancer(ctx(t), clusterIP("10.251.133.10", 80, 8080, backendEP...))
	if err != nil {
		t.Fatal(err)
	}
	// 60 connections over 3 backends picked at random miss one with probability 3·(2/3)^60.
	if seen, err := get(netns(client), "10.251.133.10", 80, 60); !slices.Equal(seen, all) {
		t.Errorf("pod → ClusterIP 10.251.133.10:80: answers %q (%v); want every backend", seen, err)
	}
	if seen, err := get("", "10.251.133.10", 80, 60); !slices.Equal(seen, all) {
		t.Errorf("host → ClusterIP 10.251.133.10:80: answers %q (%v); want every backend", seen, err)
	}

	// UDP, as the kube-dns Service's port 53.
	udp := clusterIP("10.251.133.13", 53, 5353, backendEP...)
	udp.PortMappings[0].Protocol = 17
	ulb, err := c.CreateLoadBalancer(ctx(t), udp)
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := getUDP(netns(client), "10.251.133.13", 53, 60); !slices.Equal(seen, all) {
		t.Errorf("pod → UDP ClusterIP 10.251.133.13:53: answers %q (%v); want every backend", seen, err)
	}
	if seen, err := getUDP("", "10.251.133.13", 53, 60); !slices.Equal(seen, all) {
		t.Errorf("host → UDP ClusterIP 10.251.133.13:53: answers %q (%v); want every backend", seen, err)
	}

	sticky := clusterIP("10.251.133.11", 80, 8080, backendEP...)
	sticky.PortMappings[0].DistributionType = hcn.LoadBalancerDistributionSourceIP
	slb, err := c.CreateLoadBalancer(ctx(t), sticky)
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := get(netns(client), "10.251.133.11", 80, 20); len(seen) != 1 || !slices.Contains(all, seen[0]) {
		t.Errorf("pod → ClusterIP with source-IP affinity: answers %q (%v); want one backend", seen, err)
	}

	// A remote backend is forwarded to its address, routed by the host.
	rlb, err := c.CreateLoadBalancer(ctx(t), clusterIP("10.251.133.12", 80, 8080, backendEP[0], remote.Id))
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := get(netns(client), "10.251.133.12", 80, 60); !slices.Equal(seen, []string{"backend-1", "backend-4"}) {
		t.Errorf("pod → ClusterIP with a remote backend: answers %q (%v); want backend-1 and backend-4", seen, err)
	}

	np, err := c.CreateLoadBalancer(ctx(t), nodePort(30080, 8080, backendEP[1]))
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := get("", "10.251.33.1", 30080, 3); !slices.Equal(seen, []string{"backend-2"}) {
		t.Errorf("host → its address 10.251.33.1:30080 (NodePort): answers %q (%v); want backend-2", seen, err)
	}
	if seen, err := get(netns(client), "10.251.33.1", 30080, 3); !slices.Equal(seen, []string{"backend-2"}) {
		t.Errorf("pod → the host's address 10.251.33.1:30080 (NodePort): answers %q (%v); want backend-2", seen, err)
	}

	// From outside: a namespace linked to the host as another node is (a veth pair standing
	// for the node's NIC, 192.0.2.0/24), made and removed by the test, never the machine's.
	outside := dir + "/outside"
	if out, err := run(env + fmt.Sprintf(`touch %[1]s && unshare --net=%[1]s true &&
ip link add hlbout0 type veth peer name eth0 netns %[1]s && ip addr add 192.0.2.1/24 dev hlbout0 && ip link set hlbout0 up &&
nsenter --net=%[1]s sh -c 'ip addr add 192.0.2.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 192.0.2.1'`, outside)); err != nil {
		t.Fatalf("the outside namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { run(env + "ip link del hlbout0; umount " + outside) })
	if seen, err := get(outside, "192.0.2.1", 30080, 3); !slices.Equal(seen, []string{"backend-2"}) {
		t.Errorf("outside → the host's address 192.0.2.1:30080 (NodePort): answers %q (%v); want backend-2", seen, err)
	}
	// A ClusterIP is the node's own: a client outside that routes it to the host gets nothing.
	if _, err := run(env + "nsenter --net=" + outside + " ip route add 10.251.133.10/32 via 192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if seen, _ := get(outside, "10.251.133.10", 80, 1); slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "backend-") }) {
		t.Errorf("outside → ClusterIP 10.251.133.10:80: answers %q; want none", seen)
	}

	for _, id := range []string{lb.Id, ulb.Id, slb.Id, rlb.Id, np.Id} {
		if err := c.DeleteLoadBalancer(ctx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	out, err = run(env + "nft list table ip hcsemu; ip route show 10.251.133.10; ip route show 10.251.133.11; ip route show 10.251.133.12; ip route show 10.251.133.13")
	if err != nil {
		t.Fatalf("the emulated host's rules: %v", err)
	}
	for _, s := range []string{"10.251.133.10", "10.251.133.11", "10.251.133.12", "10.251.133.13", "10.251.34.11", "30080"} {
		if strings.Contains(out, s) {
			t.Errorf("after the load balancers' deletion, %s is still in the host's rules or routes:\n%s", s, out)
		}
	}
	if seen, _ := get(netns(client), "10.251.133.10", 80, 1); slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, "backend-") }) {
		t.Errorf("pod → deleted ClusterIP: answers %q", seen)
	}
}
