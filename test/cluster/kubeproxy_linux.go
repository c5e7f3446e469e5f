//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// clusterPodCIDR holds every node's pod subnet.
const clusterPodCIDR = "10.250.0.0/16"

// kubeProxyPKI makes kube-proxy's identity, shared by the nodes as kubeadm shares it: a client
// certificate for the user system:kube-proxy, which the API server's bootstrap RBAC policy
// binds to the ClusterRole system:node-proxier (watch Services, EndpointSlices and Nodes;
// write Events), and its kubeconfig, DIR/pki/kube-proxy.kubeconfig. Made once per cluster.
func kubeProxyPKI(root string) (string, error) {
	pki := filepath.Join(root, "pki")
	path := filepath.Join(pki, "kube-proxy.kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	c, err := loadCA(filepath.Join(pki, "ca"))
	if err != nil {
		return "", err
	}
	client, err := c.issue(certSpec{cn: "system:kube-proxy", client: true}, time.Now())
	if err != nil {
		return "", err
	}
	return path, writeKubeconfig(path, fmt.Sprintf("https://%s:%d", apiAddr, apiPort), c.pem, "system:kube-proxy", client)
}

// kubeProxyFlags are the cluster's part of a node's kube-proxy flags: the cluster's pod CIDR,
// from which it tells pod traffic from the rest. The Windows part (--proxy-mode=kernelspace,
// the HNS network's name) and the Node's name are the node's: `winnode kube-proxy` adds them.
func kubeProxyFlags() []string {
	return []string{"--cluster-cidr=" + clusterPodCIDR}
}

// startKubeProxy asks the node to run kube-proxy.exe as one of its processes, as startKubelet
// does kubelet.exe: `winnode kube-proxy` returns once kube-proxy's healthz answers, which it
// does after its first sync of the cluster's Services into the node's HNS. Its own output is in
// the node's logs/kube-proxy.log; winnode's in DIR/logs/kube-proxy-NAME.log.
func startKubeProxy(root, nodeRoot, exe, name string) error {
	kubeconfig, err := kubeProxyPKI(root)
	if err != nil {
		return err
	}
	winnode := filepath.Join(nodeRoot, "bin", "winnode")
	args := append([]string{"kube-proxy", "--root", nodeRoot, "--exe", exe, "--kubeconfig", kubeconfig, "--node-name", name, "--"}, kubeProxyFlags()...)
	logPath := filepath.Join(root, "logs", "kube-proxy-"+name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(winnode, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("winnode kube-proxy: %v: %s (kube-proxy's own log: %s)", err, strings.TrimSpace(string(out)), filepath.Join(nodeRoot, "logs", "kube-proxy.log"))
	}
	return nil
}
