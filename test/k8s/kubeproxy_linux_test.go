//go:build linux

package k8s

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// kube-proxy on the Windows nodes runs one of two ways (hack/cluster.sh up --kube-proxy): the
// HostProcess pod of the DaemonSet kube-system/kube-proxy-windows (test/cluster, as kubeadm
// clusters with Windows nodes run it), or a service of each node beside kubelet.exe (winnode
// kube-proxy). The tests find out which from the cluster itself.

const (
	kubeProxyNamespace = "kube-system"
	kubeProxyName      = "kube-proxy-windows"
	kubeProxyLabel     = "k8s-app=" + kubeProxyName
)

// kubeProxyDaemonSet is the cluster's kube-proxy DaemonSet, or nil when the nodes run kube-proxy
// as a service of theirs.
func kubeProxyDaemonSet(t testing.TB, cs *kubernetes.Clientset) *appsv1.DaemonSet {
	t.Helper()
	ds, err := cs.AppsV1().DaemonSets(kubeProxyNamespace).Get(context.Background(), kubeProxyName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// kubeProxyPod is the kube-proxy pod on node, and whether there is one.
func kubeProxyPod(t testing.TB, cs *kubernetes.Clientset, node string) (corev1.Pod, bool) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(kubeProxyNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: kubeProxyLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// TestKubeProxy checks how the nodes run kube-proxy. As a DaemonSet: on every Windows node a
// Ready HostProcess pod on the host's network (its IP the node's) runs kube-proxy.exe from its
// image, has synced the Services into the node's HNS, and says in its container log (kubectl
// logs) that it uses the winkernel proxier on the node's network. As node services: there is no
// DaemonSet, and each node's kube-proxy has synced. The Services tests check what either
// programs.
func TestKubeProxy(t *testing.T) {
	cs := client(t)
	nodes := windowsNodes(t, cs)
	ds := kubeProxyDaemonSet(t, cs)
	if ds == nil {
		t.Log("kube-proxy runs as a service of each node (cluster up --kube-proxy process)")
		for _, n := range nodes {
			winnode(t, nodeRootOf(t, n.Name), "wait-kube-proxy", "--timeout", "1m")
		}
		return
	}
	ctx := context.Background()
	if ds.Status.DesiredNumberScheduled != int32(len(nodes)) || ds.Status.NumberReady != int32(len(nodes)) {
		t.Errorf("DaemonSet %s: %d scheduled, %d ready; want all %d Windows nodes", kubeProxyName,
			ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, len(nodes))
	}
	for _, n := range nodes {
		p, ok := kubeProxyPod(t, cs, n.Name)
		if !ok {
			t.Errorf("no kube-proxy pod on node %s", n.Name)
			continue
		}
		if p.Status.PodIP != nodeIP(n) {
			t.Errorf("kube-proxy pod %s on %s: IP %s, want the node's %s (host network)", p.Name, n.Name, p.Status.PodIP, nodeIP(n))
		}
		if wo := p.Spec.SecurityContext.WindowsOptions; wo == nil || wo.HostProcess == nil || !*wo.HostProcess {
			t.Errorf("kube-proxy pod %s: not a HostProcess pod", p.Name)
		}
		winnode(t, nodeRootOf(t, n.Name), "wait-kube-proxy", "--timeout", "1m")
		logs, err := cs.CoreV1().Pods(kubeProxyNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Errorf("kubectl logs %s: %v", p.Name, err)
			continue
		}
		// winkernel's start (k8s.io/kubernetes v1.37.2 pkg/proxy/winkernel/proxier.go,
		// newProxierInternal): it found the node's HNS network by name.
		if !strings.Contains(string(logs), `"Hns Network loaded" hnsNetworkInfo=`) || !strings.Contains(string(logs), "winnode") {
			t.Errorf("kube-proxy pod %s's log does not show winkernel on the network winnode:\n%s", p.Name, tail(string(logs), 20))
		}
	}
}

// restartKubeProxy stops the (first) node's kube-proxy and waits until the new one has synced
// the Services: the node service is killed and started again (winnode restart, as
// Restart-Service kube-proxy); the DaemonSet's pod is deleted, and its replacement, which kubelet
// starts from the image again, must sync.
func restartKubeProxy(t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	root := nodeRoot(t)
	if kubeProxyDaemonSet(t, cs) == nil {
		winnode(t, root, "restart", "kube-proxy")
		return
	}
	ctx := context.Background()
	old, ok := kubeProxyPod(t, cs, firstNode)
	if !ok {
		t.Fatalf("no kube-proxy pod on %s", firstNode)
	}
	// A grace period, not a forced delete: the pod object stays until kubelet has ended its
	// process, so the replacement's health below is not the old process's.
	grace := int64(1)
	if err := cs.CoreV1().Pods(kubeProxyNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLong)
	for {
		_, err := cs.CoreV1().Pods(kubeProxyNamespace).Get(ctx, old.Name, metav1.GetOptions{})
		p, ok := kubeProxyPod(t, cs, firstNode)
		if apierrors.IsNotFound(err) && ok && p.UID != old.UID && p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-proxy pod %s deleted: no replacement running on %s after %s (old pod: %v; new: %s)", old.Name, firstNode, waitLong, err, describe(&p))
		}
		time.Sleep(time.Second)
	}
	winnode(t, root, "wait-kube-proxy", "--timeout", "2m")
}

// systemPodIDs are the containerd IDs (sandboxes and containers) of the node's pods in
// kube-system, which kubectl drain leaves (DaemonSet pods: kube-proxy), asked of the node's
// containerd with ctr.exe (the CRI labels every sandbox and container with its pod's
// namespace).
func systemPodIDs(t testing.TB, root string) []string {
	t.Helper()
	env, err := rootdir.ReadEnv(filepath.Join(root, "node.env"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "bin", "winnode"), "run", "--root", root, "--",
		filepath.Join(root, "bin", "ctr.exe"), "--address", env["RUNHCS_NODE_PIPE"], "-n", "k8s.io",
		"containers", "ls", "-q", `labels."io.kubernetes.pod.namespace"==`+kubeProxyNamespace).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr.exe containers ls: %v: %s", err, out)
	}
	return strings.Fields(string(out))
}

func nodeIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
