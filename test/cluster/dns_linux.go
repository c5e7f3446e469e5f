//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// The cluster's DNS: CoreDNS (tools/coredns) as a process of the control plane, answering on
// port 53 of phys0's address, behind the kube-dns Service at kubeadm's address for it, the
// tenth of the Services range. kubelet gives pods that address (--cluster-dns) and the domain
// (--cluster-domain); on a Windows node kube-proxy makes the Service reachable from pods and
// the host (an HNS load balancer to the endpoint below).
const (
	dnsServiceIP = "10.96.0.10"
	dnsAddr      = apiAddr
	dnsReadyPort = 8181 // CoreDNS's ready plugin, on the control plane's loopback
	dnsHealth    = 8080 // its health plugin
)

// corefile serves clusterDomain and the reverse zones from the API server (the kubernetes
// plugin, with kubeadm's Corefile's options: pod records by their address, reverse lookups
// falling through) and answers nothing else: the cluster has no upstream resolver to forward
// to, so other names get SERVFAIL, not an answer from the machine's own resolver.
func (p *plane) corefile() string {
	return fmt.Sprintf(`.:53 {
    errors
    log
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
}
`, dnsHealth, dnsReadyPort, clusterDomain, p.path("coredns.kubeconfig"))
}

// The API objects of the cluster DNS, as kubeadm's CoreDNS add-on makes them, except that
// CoreDNS is not a pod: the kube-dns Service has no selector, and an EndpointSlice of ours
// (not the EndpointSlice controller's, which would remove it) names CoreDNS's address.
func dnsObjects() []struct{ path, body string } {
	return []struct{ path, body string }{
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", `{"metadata":{"name":"system:coredns"},"rules":[
			{"apiGroups":[""],"resources":["endpoints","services","pods","namespaces"],"verbs":["list","watch"]},
			{"apiGroups":["discovery.k8s.io"],"resources":["endpointslices"],"verbs":["list","watch"]}]}`},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", `{"metadata":{"name":"system:coredns"},
			"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:coredns"},
			"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"system:coredns"}]}`},
		{"/api/v1/namespaces/kube-system/services", fmt.Sprintf(`{"metadata":{"name":"kube-dns","labels":{"k8s-app":"kube-dns","kubernetes.io/name":"CoreDNS"}},
			"spec":{"clusterIP":%q,"ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}}`, dnsServiceIP)},
		{"/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices", fmt.Sprintf(`{"metadata":{"name":"kube-dns-coredns",
			"labels":{"kubernetes.io/service-name":"kube-dns","endpointslice.kubernetes.io/managed-by":"cluster.runhcs.openhcs.github.com"}},
			"addressType":"IPv4","endpoints":[{"addresses":[%q],"conditions":{"ready":true}}],
			"ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}`, dnsAddr)},
	}
}

// startDNS makes the DNS's API objects, then starts CoreDNS and waits until it serves from the
// API (its ready plugin answers once the kubernetes plugin has synced).
func (p *plane) startDNS() error {
	for _, o := range dnsObjects() {
		if err := create(p.admin, o.path, o.body); err != nil {
			return err
		}
	}
	conf := p.path("Corefile")
	if err := os.WriteFile(conf, []byte(p.corefile()), 0o644); err != nil {
		return err
	}
	pr, err := p.start("coredns", "-conf", conf)
	if err != nil {
		return err
	}
	c := insecureLocal(p.root)
	return waitReady(pr, p.path("logs", "coredns.log"), 2*time.Minute, func() error {
		return get(c, fmt.Sprintf("http://127.0.0.1:%d/ready", dnsReadyPort))
	})
}

// create POSTs an object to the API server; one that exists already is kept (up after a crash).
func create(c *http.Client, path, body string) error {
	url := fmt.Sprintf("https://%s:%d%s", apiAddr, apiPort, path)
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return fmt.Errorf("%s: the object is not JSON: %w", path, err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
}
