//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// nicName is the name of a node's link to the physical network in its host namespace, where
// Wine's GetAdaptersAddresses lists it beside the HNS networks' bridges.
const nicName = "Ethernet"

// joinCmd links a running emulated node (test/winnode, at --node-root) to the cluster and starts
// its kubelet.exe, then waits for its Node to be Ready, and then starts its kube-proxy.exe as a
// service of the node, or, when the cluster runs kube-proxy as a DaemonSet, pushes its image to
// the node before kubelet starts and waits for kubelet's kube-proxy pod to sync.
func joinCmd(args []string) error {
	fs := flag.NewFlagSet("join", flag.ExitOnError)
	root := fs.String("root", "", "the cluster's folder")
	name := fs.String("node", "", "the node's name (its Node object, kubelet's --hostname-override), lower case")
	index := fs.Int("index", 1, "the node's number on the physical network (1, 2, …): its address is 10.251.0.(10+N)")
	nodeRoot := fs.String("node-root", "", "the running node's folder (hack/winnode.sh up --root)")
	kubelet := fs.String("kubelet", "", "kubelet.exe (hack/tools.sh path kubelet.exe)")
	kubeProxy := fs.String("kube-proxy", "", "kube-proxy.exe (hack/tools.sh path kube-proxy.exe); none: the node runs no kube-proxy, so no Service reaches its pods")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the Node to be Ready")
	fs.Parse(args)
	if *root == "" || *name == "" || *nodeRoot == "" || *kubelet == "" {
		usage()
	}
	if strings.ToLower(*name) != *name || strings.ContainsAny(*name, " _/\\") {
		return fmt.Errorf("--node %q: a node name is a lower-case DNS label", *name)
	}
	addr, err := nodeAddr(*index)
	if err != nil {
		return fmt.Errorf("--index %d: %w", *index, err)
	}
	env, err := readEnv(*root)
	if err != nil {
		return err
	}
	mode := env["RUNHCS_CLUSTER_KUBE_PROXY"]
	if mode == kubeProxyDaemonSet && *kubeProxy == "" {
		return fmt.Errorf("--kube-proxy: the cluster runs kube-proxy as a DaemonSet, whose image the node needs kube-proxy.exe for")
	}
	nodeEnv, err := rootdir.ReadEnv(filepath.Join(*nodeRoot, "node.env"))
	if err != nil {
		return fmt.Errorf("--node-root %s: no running node there: %w", *nodeRoot, err)
	}
	self := joinedNode{Name: *name, Index: *index, Address: addr.String(), PodSubnet: nodeEnv["RUNHCS_NODE_POD_SUBNET"],
		HostNetns: hcsemu.HostNetnsPath(filepath.Join(*nodeRoot, "emu"))}
	others, err := readJoined(*root)
	if err != nil {
		return err
	}
	if err := checkPodSubnet(self, others); err != nil {
		return err
	}
	pr := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "cluster: "+format, a...) }
	start := time.Now()
	w := &prefixed{pr: pr}
	if err := step(w, *name+": link to the cluster network", func() error {
		return link(*root, self.HostNetns, *index, addr.String(), self.PodSubnet)
	}); err != nil {
		return err
	}
	if err := step(w, *name+": pod routes", func() error { return routePodSubnets(self, others) }); err != nil {
		return err
	}
	if err := recordJoined(*root, self); err != nil {
		return err
	}
	dir := filepath.Join(*root, "pki", "nodes", *name)
	if err := step(w, *name+": kubelet certificates", func() error { return kubeletPKI(*root, dir, *name, addr.String()) }); err != nil {
		return err
	}
	if mode == kubeProxyDaemonSet {
		if err := step(w, *name+": kube-proxy image", func() error {
			return pushKubeProxyImage(*nodeRoot, *kubeProxy, env["RUNHCS_CLUSTER_KUBE_PROXY_IMAGE"])
		}); err != nil {
			return err
		}
	}
	if err := step(w, *name+": kubelet.exe", func() error {
		return startKubelet(*root, *nodeRoot, *kubelet, dir, self, fs.Args())
	}); err != nil {
		return err
	}
	c, err := apiClient(*root)
	if err != nil {
		return err
	}
	if err := step(w, *name+": Node Ready", func() error { return waitNodeReady(c, *nodeRoot, *name, *timeout) }); err != nil {
		return err
	}
	if err := step(w, *name+": podCIDR "+self.PodSubnet, func() error { return setPodCIDR(c, *name, self.PodSubnet) }); err != nil {
		return err
	}
	switch {
	case mode == kubeProxyDaemonSet:
		if err := step(w, *name+": kube-proxy pod synced", func() error { return waitKubeProxy(*nodeRoot) }); err != nil {
			return err
		}
	case *kubeProxy != "":
		if err := step(w, *name+": kube-proxy.exe", func() error { return startKubeProxy(*root, *nodeRoot, *kubeProxy, *name) }); err != nil {
			return err
		}
	}
	pr("%-34s %7.2fs\n", *name+": joined", time.Since(start).Seconds())
	return nil
}

type prefixed struct{ pr func(string, ...any) }

func (p *prefixed) Write(b []byte) (int, error) { p.pr("%s", b); return len(b), nil }

// link gives the node's host namespace a NIC on the physical network: a veth pair whose one end,
// "Ethernet" with the node's address, moves into the node's host namespace and whose other end,
// nodeN, is a port of phys0; the control plane routes the node's pod subnet through it.
func link(root, hostNetns string, index int, addr, podSubnet string) error {
	port := fmt.Sprintf("node%d", index)
	peer := fmt.Sprintf("tmp%d", index) // renamed once it is in the node's namespace
	host, err := netns.GetFromPath(hostNetns)
	if err != nil {
		return fmt.Errorf("the node's host network namespace (is the node up?): %w", err)
	}
	defer host.Close()
	if err := withHandle(netnsFile(root), func(h *netlink.Handle) error {
		br, err := h.LinkByName(bridgeName)
		if err != nil {
			return err
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index}, PeerName: peer}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s: %w", port, err)
		}
		p, err := h.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := h.LinkSetNsFd(p, int(host)); err != nil {
			return err
		}
		return h.LinkSetUp(veth)
	}); err != nil {
		return err
	}
	if err := withHandle(hostNetns, func(h *netlink.Handle) error {
		p, err := h.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := h.LinkSetName(p, nicName); err != nil {
			return err
		}
		a, err := netlink.ParseAddr(addr + "/24")
		if err != nil {
			return err
		}
		if err := h.AddrAdd(p, a); err != nil {
			return err
		}
		return h.LinkSetUp(p)
	}); err != nil {
		return err
	}
	return withHandle(netnsFile(root), func(h *netlink.Handle) error {
		_, dst, err := net.ParseCIDR(podSubnet)
		if err != nil {
			return err
		}
		return h.RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP(addr)})
	})
}

// kubeletPKI makes the node's kubelet identity: a client certificate system:node:NAME in
// system:nodes (what the Node authorizer and NodeRestriction admit), a serving certificate for
// port 10250 naming its address (the API server checks it: --kubelet-certificate-authority),
// and its kubeconfig.
func kubeletPKI(root, dir, name, addr string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	pki := filepath.Join(root, "pki")
	c, err := loadCA(filepath.Join(pki, "ca"))
	if err != nil {
		return err
	}
	now := time.Now()
	client, err := c.issue(certSpec{cn: "system:node:" + name, orgs: []string{"system:nodes"}, client: true}, now)
	if err != nil {
		return err
	}
	serving, err := c.issue(certSpec{cn: name, dns: []string{name}, ips: []net.IP{net.ParseIP(addr)}, server: true}, now)
	if err != nil {
		return err
	}
	if err := serving.write(dir, "kubelet-serving"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), c.pem, 0o644); err != nil {
		return err
	}
	return writeKubeconfig(filepath.Join(dir, "kubelet.kubeconfig"), fmt.Sprintf("https://%s:%d", apiAddr, apiPort), c.pem, "system:node:"+name, client)
}

// win is a Linux path as Wine's Z: drive shows it to kubelet.exe.
func win(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// kubeletFlags are the cluster's part of the node's kubelet flags: its name and address, its
// TLS, and authentication and authorization of the API server's calls (logs, exec,
// port-forward) against the cluster's CA and by SubjectAccessReview, as kubeadm configures
// kubelet. The Windows part (--resolv-conf="", --cgroups-per-qos=false, the runtime's pipe, …)
// is the node's: `winnode kubelet` adds it.
func kubeletFlags(dir string, n joinedNode) []string {
	return []string{
		"--hostname-override=" + n.Name, "--node-ip=" + n.Address,
		// Counted only in standalone mode; in a cluster kubelet takes the Node's podCIDR, which
		// join sets to the same subnet (setPodCIDR). Given so that both say the same.
		"--pod-cidr=" + n.PodSubnet,
		"--client-ca-file=" + win(filepath.Join(dir, "ca.crt")),
		"--tls-cert-file=" + win(filepath.Join(dir, "kubelet-serving.crt")),
		"--tls-private-key-file=" + win(filepath.Join(dir, "kubelet-serving.key")),
		"--anonymous-auth=false", "--authentication-token-webhook=true", "--authorization-mode=Webhook",
		"--cluster-domain=" + clusterDomain, "--cluster-dns=" + dnsServiceIP,
	}
}

// startKubelet asks the node to run kubelet.exe as one of its processes: `winnode kubelet`
// (test/winnode) starts it in the node's Wine prefix and the emulated host's network namespace
// with the Windows kubelet flags, appends ours last (kubelet takes the last of a repeated flag)
// and returns once kubelet's healthz answers, leaving it running as a part of the node (the
// node's down ends it). Its own output is in the node's logs/kubelet.log; winnode's in
// DIR/logs/kubelet-NAME.log.
func startKubelet(root, nodeRoot, exe, dir string, n joinedNode, extra []string) error {
	winnode := filepath.Join(nodeRoot, "bin", "winnode")
	args := append([]string{"kubelet", "--root", nodeRoot, "--exe", exe, "--kubeconfig", filepath.Join(dir, "kubelet.kubeconfig"), "--"},
		append(kubeletFlags(dir, n), extra...)...)
	logPath := filepath.Join(root, "logs", "kubelet-"+n.Name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(winnode, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		if bytes.Contains(out, []byte("usage: winnode up")) {
			// Not there yet: branch kubelet-node adds it to test/winnode.
			return fmt.Errorf("%s has no `kubelet` subcommand yet (test/winnode's, from branch kubelet-node): kubelet.exe cannot be started on the node", winnode)
		}
		return fmt.Errorf("winnode kubelet: %v: %s (kubelet's own log: %s)", err, strings.TrimSpace(string(out)), filepath.Join(nodeRoot, "logs", "kubelet.log"))
	}
	return nil
}

// waitNodeReady waits until the Node NAME exists and its Ready condition is True.
func waitNodeReady(c *http.Client, nodeRoot, name string, timeout time.Duration) error {
	url := fmt.Sprintf("https://%s:%d/api/v1/nodes/%s", apiAddr, apiPort, name)
	deadline := time.Now().Add(timeout)
	last := "no Node yet"
	for time.Now().Before(deadline) {
		if ready, why, err := nodeReady(c, url); err == nil && ready {
			return nil
		} else if err == nil {
			last = why
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("node %s not Ready after %s: %s; see kubelet's log, %s", name, timeout, last, filepath.Join(nodeRoot, "logs", "kubelet.log"))
}

func nodeReady(c *http.Client, url string) (bool, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return false, "no Node yet (" + resp.Status + ")", nil
	}
	var n struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return false, "", err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == "Ready" {
			return cond.Status == "True", fmt.Sprintf("Ready=%s (%s: %s)", cond.Status, cond.Reason, cond.Message), nil
		}
	}
	return false, "no Ready condition yet", nil
}
