//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// kube-proxy's health port in the emulated host's network namespace: its default
// (KubeProxyConfiguration healthzBindAddress 0.0.0.0:10256), which is also where load balancers
// ask a node whether it has local endpoints of an externalTrafficPolicy: Local Service.
const kubeProxyHealthzPort = 10256

// kubeProxyOptions are `winnode kube-proxy`'s flags.
type kubeProxyOptions struct {
	root, exe, kubeconfig, nodeName string
	timeout                         time.Duration
	extra                           []string // after --, appended last: kube-proxy takes the last of a repeated flag
}

// kubeProxyMetricsPort is kube-proxy's metrics port in the emulated host (its default,
// metricsBindAddress 127.0.0.1:10249).
const kubeProxyMetricsPort = 10249

// kubeProxyAgent is kube-proxy.exe as a node service: healthy once its healthz answers 200 and
// it has programmed the cluster's Services into the node's HNS once. Its healthz alone does not
// say that: it answers 200 from the start, until updates it has queued wait too long
// (k8s.io/kubernetes v1.37.2 pkg/proxy/healthcheck/proxy_health.go, Health), so a client that
// trusted it right after a restart met Services not programmed yet. The first sync shows in its
// metrics: winkernel sets kubeproxy_sync_proxy_rules_last_timestamp_seconds at the end of each
// sync that programmed HNS (pkg/proxy/winkernel/proxier.go, syncProxyRules), and not while it
// waits for its first Services and endpoints.
var kubeProxyAgent = agent{name: "kube-proxy", exe: "kube-proxy.exe", healthy: kubeProxyHealthy}

func kubeProxyHealthy(root string) bool {
	if _, err := hostGet(root, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeProxyHealthzPort)); err != nil {
		return false
	}
	metrics, err := hostGet(root, fmt.Sprintf("http://127.0.0.1:%d/metrics", kubeProxyMetricsPort))
	return err == nil && synced(string(metrics))
}

// synced reports whether kube-proxy's metrics show a completed sync of its IPv4 proxier (the
// node's family; in dual-stack mode the IPv6 proxier has its own).
func synced(metrics string) bool {
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, `ip_family="IPv4"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return err == nil && v > 0
	}
	return false
}

// kubeProxyCmd starts kube-proxy.exe (the Windows build) as one of the node's services (agent)
// and returns once it has synced the cluster's Services (kubeProxyAgent), with the flags a Windows node runs it with
// (kubeProxyArgs).
func kubeProxyCmd(args []string) error {
	fs := flag.NewFlagSet("kube-proxy", flag.ExitOnError)
	var o kubeProxyOptions
	fs.StringVar(&o.root, "root", "", "the node's folder")
	fs.StringVar(&o.exe, "exe", "", "kube-proxy.exe, the Windows build of kube-proxy")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig of the API server (a Linux path), with kube-proxy's identity (system:kube-proxy)")
	fs.StringVar(&o.nodeName, "node-name", "", "the node's name (--hostname-override): its Node object's; default: the root folder's name, as a DNS label")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for kube-proxy's healthz")
	fs.Parse(args)
	o.extra = fs.Args()
	if o.root == "" || !filepath.IsAbs(o.root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", o.root)
	}
	if st, err := os.Stat(o.exe); o.exe == "" || err != nil || st.IsDir() {
		return fmt.Errorf("--exe %q: kube-proxy.exe is required: %v", o.exe, err)
	}
	if o.kubeconfig == "" {
		return fmt.Errorf("--kubeconfig: kube-proxy needs the API server's kubeconfig")
	}
	if _, err := os.Stat(o.kubeconfig); err != nil {
		return fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
	}
	if o.nodeName == "" {
		o.nodeName = dnsLabel(filepath.Base(o.root))
	} else if dnsLabel(o.nodeName) != o.nodeName {
		return fmt.Errorf("--node-name %q: not a lower-case DNS label (RFC 1123)", o.nodeName)
	}
	env, err := readEnv(o.root)
	if err != nil {
		return err
	}
	return kubeProxyAgent.run(o.root, env, args, o.exe, kubeProxyArgs(o), o.timeout)
}

// kubeProxyArgs are kube-proxy.exe's flags on a Windows node: the winkernel proxier
// (--proxy-mode=kernelspace) on the node's HNS network, found by name (--network-name; Windows
// nodes also set it through KUBE_NETWORK), under the Node's name. The node's network is an
// L2Bridge, for which kube-proxy needs no source VIP (only overlay networks do: winkernel
// proxier.go, newProxierInternal).
func kubeProxyArgs(o kubeProxyOptions) []string {
	args := []string{
		"--proxy-mode=kernelspace",
		"--network-name=" + network,
		"--hostname-override=" + o.nodeName,
		"--kubeconfig=" + win(o.kubeconfig),
		fmt.Sprintf("--healthz-bind-address=0.0.0.0:%d", kubeProxyHealthzPort),
		"--v=2",
	}
	return append(args, o.extra...)
}

// waitKubeProxyCmd returns once the node's kube-proxy has synced the cluster's Services
// (kubeProxyAgent's health), whoever started it: `winnode kube-proxy`, or kubelet as the
// HostProcess pod of a DaemonSet (test/cluster's --kube-proxy daemonset), which winnode does not
// start and cannot restart.
func waitKubeProxyCmd(args []string) error {
	fs := flag.NewFlagSet("wait-kube-proxy", flag.ExitOnError)
	root := fs.String("root", "", "the node's folder")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait")
	fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", *root)
	}
	if _, err := readEnv(*root); err != nil {
		return err
	}
	start := time.Now()
	for !kubeProxyHealthy(*root) {
		if time.Since(start) > *timeout {
			return fmt.Errorf("no kube-proxy of the node at %s answered healthy and synced (http://127.0.0.1:%d/healthz, :%d/metrics) within %s", *root, kubeProxyHealthzPort, kubeProxyMetricsPort, *timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "winnode: kube-proxy synced after %.2fs\n", time.Since(start).Seconds())
	return nil
}
