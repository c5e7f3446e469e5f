//go:build linux

package main

import (
	"encoding/json"
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

// How the nodes run kube-proxy (cluster up --kube-proxy).
const (
	// kubeProxyDaemonSet: kube-proxy.exe is the HostProcess pod of a DaemonSet, as kubeadm
	// clusters with Windows nodes run it (sig-windows-tools' kube-proxy DaemonSet,
	// "kube-proxy-windows", and Kubernetes' "Adding Windows worker nodes"): kubelet starts it
	// from an image, with a service account's token.
	kubeProxyDaemonSet = "daemonset"
	// kubeProxyProcess: kube-proxy.exe is a service of the node beside kubelet.exe, with a
	// client certificate (winnode kube-proxy), as clusters that install it on the host run it
	// (AKS's Windows nodes; Restart-Service kube-proxy).
	kubeProxyProcess = "process"
)

// The DaemonSet's names, sig-windows-tools' kube-proxy-windows in kube-system, and its image:
// kube-proxy.exe of the pinned release in the node's registry (winnode image), tagged with the
// release.
const (
	kubeProxyName      = "kube-proxy-windows"
	kubeProxyRepo      = "runhcs/kube-proxy"
	kubeProxyExeInImg  = "kube-proxy/kube-proxy.exe"
	kubeProxyConfigDir = "/var/lib/kube-proxy"
)

// nodeNetwork is the name of each emulated node's HNS network, the pods' L2Bridge
// (test/winnode's network), on which kube-proxy programs the Services (--network-name).
const nodeNetwork = "winnode"

// kubeProxyImage is the DaemonSet's image for the release the API server reports.
func kubeProxyImage(version string) string { return "docker.io/" + kubeProxyRepo + ":" + version }

// kubeProxyPodKubeconfig is the DaemonSet's kubeconfig (its ConfigMap's kubeconfig.conf):
// the API server, with the service account's token and the cluster's CA from the token's
// projected volume. A HostProcess container sees its volumes below its files on the host
// (%CONTAINER_SANDBOX_MOUNT_POINT%\var\lib\kube-proxy, …\var\run\secrets\…), not at the
// mount path, so the paths are relative to this file, which client-go resolves against the
// file's folder (clientcmd ResolveLocalPaths), as sig-windows-tools' kube-proxy kubeconfig
// reaches them through %CONTAINER_SANDBOX_MOUNT_POINT%.
func kubeProxyPodKubeconfig() string {
	sa := "../../run/secrets/kubernetes.io/serviceaccount/"
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: https://%s:%d
    certificate-authority: %sca.crt
users:
- name: kube-proxy
  user:
    tokenFile: %stoken
contexts:
- name: kube-proxy
  context:
    cluster: cluster
    user: kube-proxy
current-context: kube-proxy
`, apiAddr, apiPort, sa, sa)
}

// kubeProxyObjects are the API objects of kube-proxy as a DaemonSet on the Windows nodes:
// its service account bound to the bootstrap ClusterRole system:node-proxier (as kubeadm's
// kubeadm:node-proxier binding does), the ConfigMap of its kubeconfig, and the DaemonSet: a
// HostProcess pod on the host's network as SYSTEM, kube-proxy.exe started from its image's
// files (%CONTAINER_SANDBOX_MOUNT_POINT%, which the runtime expands) with a Windows node's
// flags (those `winnode kube-proxy` gives the node service, and the cluster's kubeProxyFlags),
// tolerating every taint and node-critical, as kube-proxy must run on every node.
func kubeProxyObjects(image string) ([]struct{ path, body string }, error) {
	mount := "%CONTAINER_SANDBOX_MOUNT_POINT%"
	args := append([]string{
		"--proxy-mode=kernelspace",
		"--network-name=" + nodeNetwork,
		"--hostname-override=$(NODE_NAME)",
		`--kubeconfig=` + mount + `\var\lib\kube-proxy\kubeconfig.conf`,
		"--healthz-bind-address=0.0.0.0:10256",
		"--v=2",
	}, kubeProxyFlags()...)
	labels := map[string]string{"k8s-app": kubeProxyName}
	objs := []struct {
		path string
		obj  map[string]any
	}{
		{"/api/v1/namespaces/kube-system/serviceaccounts", map[string]any{"metadata": map[string]any{"name": "kube-proxy"}}},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", map[string]any{
			"metadata": map[string]any{"name": "runhcs:node-proxier"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-proxier"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}},
		}},
		{"/api/v1/namespaces/kube-system/configmaps", map[string]any{
			"metadata": map[string]any{"name": kubeProxyName, "labels": labels},
			"data":     map[string]any{"kubeconfig.conf": kubeProxyPodKubeconfig()},
		}},
		{"/apis/apps/v1/namespaces/kube-system/daemonsets", map[string]any{
			"metadata": map[string]any{"name": kubeProxyName, "labels": labels},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"nodeSelector":       map[string]any{"kubernetes.io/os": "windows"},
						"hostNetwork":        true,
						"serviceAccountName": "kube-proxy",
						"priorityClassName":  "system-node-critical",
						"tolerations":        []any{map[string]any{"operator": "Exists"}},
						"securityContext": map[string]any{"windowsOptions": map[string]any{
							"hostProcess": true, "runAsUserName": `NT AUTHORITY\SYSTEM`}},
						"containers": []any{map[string]any{
							"name":            "kube-proxy",
							"image":           image,
							"imagePullPolicy": "IfNotPresent",
							"command":         []string{mount + `\` + strings.ReplaceAll(kubeProxyExeInImg, "/", `\`)},
							"args":            args,
							"env": []any{map[string]any{"name": "NODE_NAME", "valueFrom": map[string]any{
								"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}}},
							"volumeMounts": []any{map[string]any{"name": "kube-proxy", "mountPath": kubeProxyConfigDir}},
						}},
						"volumes": []any{map[string]any{"name": "kube-proxy", "configMap": map[string]any{"name": kubeProxyName}}},
					},
				},
			},
		}},
	}
	out := make([]struct{ path, body string }, 0, len(objs))
	for _, o := range objs {
		b, err := json.Marshal(o.obj)
		if err != nil {
			return nil, err
		}
		out = append(out, struct{ path, body string }{o.path, string(b)})
	}
	return out, nil
}

// startKubeProxyDaemonSet makes the DaemonSet's objects for the API server's release and
// returns its image, which each node's join pushes into that node's registry.
func (p *plane) startKubeProxyDaemonSet() (string, error) {
	resp, err := p.admin.Get(fmt.Sprintf("https://%s:%d/version", apiAddr, apiPort))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.GitVersion == "" {
		return "", fmt.Errorf("the API server's /version: %q, %v", v.GitVersion, err)
	}
	image := kubeProxyImage(v.GitVersion)
	objs, err := kubeProxyObjects(image)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if err := create(p.admin, o.path, o.body); err != nil {
			return "", err
		}
	}
	return image, nil
}

// pushKubeProxyImage pushes the DaemonSet's image, kube-proxy.exe at kubeProxyExeInImg, into the
// node's registry (winnode image), before its kubelet starts.
func pushKubeProxyImage(nodeRoot, exe, image string) error {
	ref := strings.TrimPrefix(image, "docker.io/")
	out, err := exec.Command(filepath.Join(nodeRoot, "bin", "winnode"), "image", "--root", nodeRoot, "--ref", ref, exe+"="+kubeProxyExeInImg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("winnode image %s: %v: %s", ref, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitKubeProxy waits until the node's kube-proxy pod has synced the cluster's Services into
// the node's HNS (winnode wait-kube-proxy).
func waitKubeProxy(nodeRoot string) error {
	out, err := exec.Command(filepath.Join(nodeRoot, "bin", "winnode"), "wait-kube-proxy", "--root", nodeRoot).CombinedOutput()
	if err != nil {
		return fmt.Errorf("winnode wait-kube-proxy: %v: %s (kubectl -n kube-system get pods -l k8s-app=%s)", err, strings.TrimSpace(string(out)), kubeProxyName)
	}
	return nil
}
