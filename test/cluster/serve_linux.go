//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// plane is what serve runs: the control plane.
type plane struct {
	flags
	mu    sync.Mutex // guards procs: stop may run while up still starts parts
	procs []*proc
	steps *os.File
	admin *http.Client // the API server, as the cluster's administrator
}

// proc is a process of the control plane and its end.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func serveCmd(args []string) error {
	var p plane
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	p.register(fs)
	fs.Parse(args)
	if err := p.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(filepath.Join(p.root, "serve.pid"), []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		return err
	}
	var err error
	if p.steps, err = os.Create(filepath.Join(p.root, "steps")); err != nil {
		return err
	}
	defer p.steps.Close()
	// up runs beside the signal wait: a SIGTERM while a step hangs stops the cluster too.
	upErr := make(chan error, 1)
	go func() { upErr <- p.up(ctx) }()
	select {
	case err = <-upErr:
		if err == nil {
			err = p.watch(ctx)
		}
	case <-ctx.Done():
	}
	p.stop()
	return err
}

// watch waits for SIGTERM; a part of the control plane that exits on its own is reported in
// serve.log (the cluster is then broken; down cleans up).
func (p *plane) watch(ctx context.Context) error {
	p.mu.Lock()
	procs := append([]*proc(nil), p.procs...)
	p.mu.Unlock()
	for _, pr := range procs {
		go func() {
			select {
			case <-pr.done:
				fmt.Fprintf(os.Stderr, "cluster: %s exited (%v); see logs/%s.log\n", pr.name, pr.err, pr.name)
			case <-ctx.Done():
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// step runs one step of bringing the cluster up and records how long it took.
func step(w io.Writer, name string, fn func() error) error {
	start := time.Now()
	err := fn()
	status := "ok"
	if err != nil {
		status = "FAILED: " + err.Error()
	}
	fmt.Fprintf(w, "%-34s %7.2fs %s\n", name, time.Since(start).Seconds(), status)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (p *plane) path(elem ...string) string {
	return filepath.Join(append([]string{p.root}, elem...)...)
}

func (p *plane) up(ctx context.Context) error {
	start := time.Now()
	if err := step(p.steps, "certificates and keys", p.pki); err != nil {
		return err
	}
	if err := step(p.steps, "control-plane network namespace", p.network); err != nil {
		return err
	}
	var err error
	if p.admin, err = apiClient(p.root); err != nil {
		return err
	}
	if err := step(p.steps, "etcd", p.startEtcd); err != nil {
		return err
	}
	if err := step(p.steps, "kube-apiserver", p.startAPIServer); err != nil {
		return err
	}
	if err := step(p.steps, "kube-controller-manager", p.startControllerManager); err != nil {
		return err
	}
	if err := step(p.steps, "kube-scheduler", p.startScheduler); err != nil {
		return err
	}
	if err := step(p.steps, "cluster DNS (CoreDNS)", p.startDNS); err != nil {
		return err
	}
	var kubeProxyImage string
	if p.kubeProxy == kubeProxyDaemonSet {
		if err := step(p.steps, "kube-proxy DaemonSet", func() (err error) { kubeProxyImage, err = p.startKubeProxyDaemonSet(); return err }); err != nil {
			return err
		}
	}
	fmt.Fprintf(p.steps, "%-34s %7.2fs (API server https://%s:%d)\n", "control plane up", time.Since(start).Seconds(), apiAddr, apiPort)
	return rootdir.WriteEnv(envFile(p.root), [][2]string{
		{"KUBECONFIG", kubeconfigOf(p.root)}, {"RUNHCS_CLUSTER_ROOT", p.root},
		{"RUNHCS_CLUSTER_NETNS", netnsFile(p.root)}, {"RUNHCS_CLUSTER_SERVER", fmt.Sprintf("https://%s:%d", apiAddr, apiPort)},
		{"RUNHCS_CLUSTER_KUBE_PROXY", p.kubeProxy}, {"RUNHCS_CLUSTER_KUBE_PROXY_IMAGE", kubeProxyImage},
	})
}

// pki makes the cluster's CAs, certificates, service-account keys and kubeconfigs under
// DIR/pki, the names and organisations kubeadm gives them (Kubernetes' "PKI certificates and
// requirements"): the API server's RBAC bootstrap policy binds system:kube-controller-manager
// and system:kube-scheduler, and system:masters is the administrators' group. etcd has a CA of
// its own, so no other certificate of the cluster opens it.
func (p *plane) pki() error {
	dir := p.path("pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	kube, err := newCA("runhcs-kubernetes-ca", now)
	if err != nil {
		return err
	}
	etcdCA, err := newCA("runhcs-etcd-ca", now)
	if err != nil {
		return err
	}
	if err := writeCA(dir, "ca", kube); err != nil {
		return err
	}
	if err := writeCA(dir, "etcd-ca", etcdCA); err != nil {
		return err
	}
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	for _, c := range []struct {
		ca   *ca
		name string
		spec certSpec
	}{
		{etcdCA, "etcd-server", certSpec{cn: "etcd", dns: []string{"localhost"}, ips: loop, server: true, client: true}},
		{etcdCA, "apiserver-etcd-client", certSpec{cn: "kube-apiserver-etcd-client", client: true}},
		{kube, "apiserver", certSpec{cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + clusterDomain},
			ips: []net.IP{net.ParseIP(apiAddr), net.ParseIP(serviceIP), net.ParseIP("127.0.0.1")}}},
		{kube, "apiserver-kubelet-client", certSpec{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}},
	} {
		kp, err := c.ca.issue(c.spec, now)
		if err != nil {
			return err
		}
		if err := kp.write(dir, c.name); err != nil {
			return err
		}
	}
	server := fmt.Sprintf("https://%s:%d", apiAddr, apiPort)
	for _, c := range []struct {
		file string
		spec certSpec
	}{
		{kubeconfigOf(p.root), certSpec{cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true}},
		{p.path("controller-manager.kubeconfig"), certSpec{cn: "system:kube-controller-manager", client: true}},
		{p.path("scheduler.kubeconfig"), certSpec{cn: "system:kube-scheduler", client: true}},
		{p.path("coredns.kubeconfig"), certSpec{cn: "system:coredns", client: true}},
	} {
		kp, err := kube.issue(c.spec, now)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(c.file, server, kube.pem, c.spec.cn, kp); err != nil {
			return err
		}
		if c.file == kubeconfigOf(p.root) {
			// The serve process's own client (readiness, Node checks) uses the same identity.
			if err := kp.write(dir, "admin"); err != nil {
				return err
			}
		}
	}
	priv, pub, err := serviceAccountKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pub, 0o644)
}

// writeCA stores a CA's certificate and key (the controller manager signs with the cluster CA's
// key: kubelet's certificate requests, if any).
func writeCA(dir, name string, c *ca) error {
	k, err := keyPEM(c.key)
	if err != nil {
		return err
	}
	return keyPair{cert: c.pem, key: k}.write(dir, name)
}

// network makes the control plane's namespace: loopback up, the physical network's bridge with
// the API server's address, forwarding on (the control plane routes between nodes' subnets, as
// a physical network's router does).
func (p *plane) network() error {
	if err := os.MkdirAll(filepath.Dir(netnsFile(p.root)), 0o700); err != nil {
		return err
	}
	if err := hcsemu.NewNetnsFile(netnsFile(p.root)); err != nil {
		return err
	}
	if err := withHandle(netnsFile(p.root), func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(lo); err != nil {
			return err
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("bridge %s: %w", bridgeName, err)
		}
		addr, err := netlink.ParseAddr(apiAddr + "/24")
		if err != nil {
			return err
		}
		if err := h.AddrAdd(br, addr); err != nil {
			return err
		}
		return h.LinkSetUp(br)
	}); err != nil {
		return err
	}
	return hcsemu.InNetns(netnsFile(p.root), func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
}

// withHandle runs fn with a netlink handle in the namespace bound at path.
func withHandle(path string, fn func(*netlink.Handle) error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

// start starts a control-plane binary in the namespace (netns-exec), its output in
// logs/NAME.log.
func (p *plane) start(name string, args ...string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(p.path("logs", name+".log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(self, append([]string{"netns-exec", netnsFile(p.root), filepath.Join(p.bin, name)}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.root // down finds what a crash left by its working folder too
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { pr.err = cmd.Wait(); close(pr.done) }()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	return pr, nil
}

// waitReady polls ready until it holds, the process ends or the timeout passes.
func waitReady(pr *proc, logs string, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-pr.done:
			return fmt.Errorf("%s exited (%v); see %s", pr.name, pr.err, logs)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%v); see %s", pr.name, timeout, err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *plane) pkiFile(name string) string { return p.path("pki", name) }

func (p *plane) startEtcd() error {
	pr, err := p.start("etcd",
		"--data-dir", p.path("etcd"),
		"--listen-client-urls", "https://127.0.0.1:2379", "--advertise-client-urls", "https://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "default=http://127.0.0.1:2380", "--listen-metrics-urls", "",
		"--cert-file", p.pkiFile("etcd-server.crt"), "--key-file", p.pkiFile("etcd-server.key"),
		"--trusted-ca-file", p.pkiFile("etcd-ca.crt"), "--client-cert-auth",
		// A throw-away store in a temporary folder on a shared machine: no fsync.
		"--unsafe-no-fsync")
	if err != nil {
		return err
	}
	c, err := p.tlsClient("etcd-ca.crt", "apiserver-etcd-client")
	if err != nil {
		return err
	}
	return waitReady(pr, p.path("logs", "etcd.log"), 2*time.Minute, func() error { return get(c, "https://127.0.0.1:2379/health") })
}

func (p *plane) startAPIServer() error {
	pr, err := p.start("kube-apiserver",
		"--advertise-address", apiAddr, "--bind-address", "0.0.0.0", "--secure-port", fmt.Sprint(apiPort),
		"--etcd-servers", "https://127.0.0.1:2379", "--etcd-cafile", p.pkiFile("etcd-ca.crt"),
		"--etcd-certfile", p.pkiFile("apiserver-etcd-client.crt"), "--etcd-keyfile", p.pkiFile("apiserver-etcd-client.key"),
		"--tls-cert-file", p.pkiFile("apiserver.crt"), "--tls-private-key-file", p.pkiFile("apiserver.key"),
		"--client-ca-file", p.pkiFile("ca.crt"),
		"--kubelet-client-certificate", p.pkiFile("apiserver-kubelet-client.crt"), "--kubelet-client-key", p.pkiFile("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", p.pkiFile("ca.crt"), "--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc."+clusterDomain,
		"--service-account-key-file", p.pkiFile("sa.pub"), "--service-account-signing-key-file", p.pkiFile("sa.key"),
		"--service-cluster-ip-range", serviceRange,
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true", "--cert-dir", p.path("pki", "apiserver-generated"))
	if err != nil {
		return err
	}
	return waitReady(pr, p.path("logs", "kube-apiserver.log"), 3*time.Minute, func() error {
		return get(p.admin, fmt.Sprintf("https://%s:%d/readyz", apiAddr, apiPort))
	})
}

func (p *plane) startControllerManager() error {
	kc := p.path("controller-manager.kubeconfig")
	pr, err := p.start("kube-controller-manager",
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--leader-elect=false", "--use-service-account-credentials",
		"--service-account-private-key-file", p.pkiFile("sa.key"), "--root-ca-file", p.pkiFile("ca.crt"),
		"--cluster-signing-cert-file", p.pkiFile("ca.crt"), "--cluster-signing-key-file", p.pkiFile("ca.key"),
		"--service-cluster-ip-range", serviceRange, "--cert-dir", p.path("pki", "controller-manager-generated"))
	if err != nil {
		return err
	}
	c := insecureLocal(p.root)
	return waitReady(pr, p.path("logs", "kube-controller-manager.log"), 2*time.Minute, func() error { return get(c, "https://127.0.0.1:10257/healthz") })
}

func (p *plane) startScheduler() error {
	kc := p.path("scheduler.kubeconfig")
	pr, err := p.start("kube-scheduler",
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--leader-elect=false", "--cert-dir", p.path("pki", "scheduler-generated"))
	if err != nil {
		return err
	}
	c := insecureLocal(p.root)
	return waitReady(pr, p.path("logs", "kube-scheduler.log"), 2*time.Minute, func() error { return get(c, "https://127.0.0.1:10259/healthz") })
}

// stop stops the processes in reverse order, each with SIGTERM and, after 30 s, SIGKILL.
func (p *plane) stop() {
	p.mu.Lock()
	procs := append([]*proc(nil), p.procs...)
	p.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		pr := procs[i]
		pr.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-pr.done:
		case <-time.After(30 * time.Second):
			pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}

// inNetnsDialer dials from inside the namespace bound at path: the socket is made there and
// stays there, so a client in the machine's namespace talks to the cluster's addresses.
func inNetnsDialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := hcsemu.InNetns(path, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// tlsClient is an HTTPS client in the cluster's namespace trusting the CA pki/CAFILE and
// presenting pki/CERT.crt.
func (p *plane) tlsClient(caFile, cert string) (*http.Client, error) {
	return newTLSClient(p.root, p.pkiFile(caFile), p.pkiFile(cert+".crt"), p.pkiFile(cert+".key"))
}

// apiClient is the API server's client as the cluster's administrator, in the namespace.
func apiClient(root string) (*http.Client, error) {
	pki := filepath.Join(root, "pki")
	return newTLSClient(root, filepath.Join(pki, "ca.crt"), filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
}

func newTLSClient(root, caFile, certFile, keyFile string) (*http.Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     inNetnsDialer(netnsFile(root)),
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}},
	}}, nil
}

// insecureLocal checks the controller manager's and scheduler's health endpoints, served with
// certificates they make for themselves (as kubeadm's probes do, without verifying them).
func insecureLocal(root string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     inNetnsDialer(netnsFile(root)),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
}

// get answers nil when url answers 200.
func get(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
