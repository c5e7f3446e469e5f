//go:build linux

package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openhcs/runhcs/internal/testenv"
)

// The cluster's Windows nodes (hack/cluster.sh up --windows-nodes N, docs/cluster.md "Two
// nodes"): node K is winnode-K, at 10.251.0.(10+K) on the physical network, with the pod subnet
// 10.250.(K-1).0/24, and each node's host routes the other nodes' pod subnets.
//
// How the suite knows how many there are: it reads the Node list. hack/cluster.sh test also
// says how many it brought up (RUNHCS_CLUSTER_WINDOWS_NODES), and then the Node list must agree;
// the tests across nodes skip on a cluster of one node, unless that variable asks for more.

// windowsNodes lists the cluster's Windows nodes by name; with RUNHCS_CLUSTER_WINDOWS_NODES set,
// their number must be that.
func windowsNodes(t testing.TB, cs *kubernetes.Clientset) []corev1.Node {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: corev1.LabelOSStable + "=windows"})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	if want := wantWindowsNodes(t); want != 0 && len(nodes.Items) != want {
		t.Fatalf("%d Windows nodes, want %d (RUNHCS_CLUSTER_WINDOWS_NODES)", len(nodes.Items), want)
	}
	return nodes.Items
}

// wantWindowsNodes is RUNHCS_CLUSTER_WINDOWS_NODES, or 0 when it is not set.
func wantWindowsNodes(t testing.TB) int {
	t.Helper()
	v := os.Getenv("RUNHCS_CLUSTER_WINDOWS_NODES")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("RUNHCS_CLUSTER_WINDOWS_NODES=%q: want a number of nodes", v)
	}
	return n
}

// twoNodes is the cluster's first two Windows nodes, for the tests across nodes. On a cluster
// of one node they skip, unless RUNHCS_CLUSTER_WINDOWS_NODES asks for two or more (windowsNodes
// fails then).
func twoNodes(t *testing.T, cs *kubernetes.Clientset) (corev1.Node, corev1.Node) {
	t.Helper()
	nodes := windowsNodes(t, cs)
	if len(nodes) < 2 {
		msg := fmt.Sprintf("the cluster has %d Windows node(s): the tests across nodes need 2 (hack/cluster.sh up --windows-nodes 2)", len(nodes))
		if testenv.InCI() && wantWindowsNodes(t) == 0 {
			// CI runs the suite through hack/cluster.sh test, which always says how many.
			t.Fatal(msg + "; RUNHCS_CLUSTER_WINDOWS_NODES is not set")
		}
		t.Skip(msg)
	}
	return nodes[0], nodes[1]
}

// nodeIndex is K of node winnode-K.
func nodeIndex(t testing.TB, name string) int {
	t.Helper()
	k, err := strconv.Atoi(strings.TrimPrefix(name, "winnode-"))
	if err != nil || !strings.HasPrefix(name, "winnode-") {
		t.Fatalf("node %q: hack/cluster.sh names its nodes winnode-K", name)
	}
	return k
}

// checkNodeNetwork checks a node's place on the cluster's networks: InternalIP
// 10.251.0.(10+K), podCIDR 10.250.(K-1).0/24 (test/cluster join sets it to the node's HNS
// network's subnet), and the hostname label kubelet sets to its name.
func checkNodeNetwork(t *testing.T, n *corev1.Node) {
	t.Helper()
	k := nodeIndex(t, n.Name)
	wantIP := fmt.Sprintf("10.251.0.%d", 10+k)
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	if len(ips) != 1 || ips[0] != wantIP {
		t.Errorf("node %s: InternalIP %v, want %s", n.Name, ips, wantIP)
	}
	wantCIDR := fmt.Sprintf("10.250.%d.0/24", k-1)
	if n.Spec.PodCIDR != wantCIDR || len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != wantCIDR {
		t.Errorf("node %s: podCIDR %q, podCIDRs %v; want %s", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs, wantCIDR)
	}
	if got := n.Labels[corev1.LabelHostname]; got != n.Name {
		t.Errorf("node %s: label %s = %q", n.Name, corev1.LabelHostname, got)
	}
}

// inPodCIDR says whether ip is in the node's podCIDR.
func inPodCIDR(t *testing.T, cs *kubernetes.Clientset, node, ip string) bool {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err1 := netip.ParsePrefix(n.Spec.PodCIDR)
	a, err2 := netip.ParseAddr(ip)
	return err1 == nil && err2 == nil && p.Contains(a)
}

// spreadOverNodes spreads the Deployment's replicas evenly over the Windows nodes: a hard
// spread over the nodes' hostnames. A cordoned node's taint takes it out of the spread's domains
// (Honor), so replicas evicted by a drain may all go to the other node.
func spreadOverNodes(d *appsv1.Deployment) *appsv1.Deployment {
	spec := &d.Spec.Template.Spec
	spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	honor := corev1.NodeInclusionPolicyHonor
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: d.Spec.Selector, NodeTaintsPolicy: &honor,
	}}
	return d
}

// onNode pins a pod to a node by name (spec.nodeName: no scheduler).
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	p.Spec.NodeName = node
	return p
}

// TestPodTrafficAcrossNodes checks pod-to-pod traffic between the two nodes, both ways: on
// each node a pod runs the workload's echo server, and a pod on the other node connects to its
// address and reads the echo. The packets go pod → its node's HNS bridge → the node's route to
// the other node's pod subnet over the physical network → the other node's bridge → the pod,
// and back. The server sees the client pod's own address: the nodes' CNI configuration exempts
// the cluster's pod CIDR from outbound NAT (win-bridge's OutBoundNAT exception list), as
// Windows clusters do.
func TestPodTrafficAcrossNodes(t *testing.T) {
	cs := client(t)
	a, b := twoNodes(t, cs)
	ns := namespace(t, cs)
	ctx := context.Background()
	servers := map[string]*corev1.Pod{}
	for _, node := range []string{a.Name, b.Name} {
		name := "server-" + node
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, onNode(windowsPod(name, corev1.RestartPolicyAlways,
			workloadContainer("echo", "listen", ":9000")), node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		servers[node] = nil
	}
	for node := range servers {
		s := waitPod(t, cs, ns, "server-"+node, func(p *corev1.Pod) bool {
			return p.Status.Phase != corev1.PodPending && p.Status.PodIP != ""
		})
		if s.Status.Phase != corev1.PodRunning || !inPodCIDR(t, cs, node, s.Status.PodIP) {
			t.Fatalf("server pod on %s: %s, IP %q (want one of the node's podCIDR)", node, describe(s), s.Status.PodIP)
		}
		servers[node] = s
	}
	for _, pair := range [][2]string{{a.Name, b.Name}, {b.Name, a.Name}} {
		from, to := pair[0], pair[1]
		t.Run(from+"-to-"+to, func(t *testing.T) {
			s := servers[to]
			name := "client-" + from
			msg := "hello from " + from
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, onNode(windowsPod(name, corev1.RestartPolicyNever,
				workloadContainer("connect", "connect", s.Status.PodIP+":9000", msg)), from), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			c := waitPod(t, cs, ns, name, podFinished)
			out := kubectl(t, "", "logs", "-n", ns, name)
			if c.Status.Phase != corev1.PodSucceeded || strings.TrimSpace(out) != "echo: "+msg {
				t.Fatalf("client pod on %s (%s) → server on %s (%s:9000): %s; logs %q, want the echo", from, c.Status.PodIP, to, s.Status.PodIP, describe(c), out)
			}
			if !inPodCIDR(t, cs, from, c.Status.PodIP) {
				t.Errorf("client pod on %s has the address %s, not of the node's podCIDR", from, c.Status.PodIP)
			}
			// The server names the address the connection came from: the client pod's, not its
			// node's (no SNAT between pods).
			logs := kubectl(t, "", "logs", "-n", ns, s.Name)
			if !strings.Contains(logs, "accepted from "+c.Status.PodIP+":") {
				t.Errorf("server on %s: logs %q; want a connection from the client pod's address %s (no NAT between pods)", to, logs, c.Status.PodIP)
			}
		})
	}
}

// TestDrainToOtherNode runs a Deployment spread over both nodes, drains the second node with
// kubectl and checks that the Deployment's pods moved to the first (all Ready there, none left
// on the drained node) and that the drained node holds nothing of them any more (drainNode:
// the checks TestDeployment makes of a drained node).
func TestDrainToOtherNode(t *testing.T) {
	cs := client(t)
	a, b := twoNodes(t, cs)
	ns := namespace(t, cs)
	ctx := context.Background()
	t.Cleanup(func() { kubectlQuiet("uncordon", b.Name) })
	const replicas = 4
	d := spreadOverNodes(webDeployment("spread", replicas, "spread"))
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, ns, "spread")
	perNode := map[string]int{}
	for _, p := range podsOf(t, cs, ns, "spread") {
		perNode[p.Spec.NodeName]++
	}
	if perNode[a.Name] != replicas/2 || perNode[b.Name] != replicas/2 {
		t.Fatalf("replicas per node %v, want %d on each of %s and %s", perNode, replicas/2, a.Name, b.Name)
	}

	drainNode(t, cs, b.Name, nodeRootOf(t, b.Name))
	// The evicted replicas run on the other node now.
	waitRollout(t, cs, ns, "spread")
	deadline := time.Now().Add(waitLong)
	for {
		pods := podsOf(t, cs, ns, "spread")
		var where []string
		moved := len(pods) == replicas
		for _, p := range pods {
			where = append(where, p.Name+" on "+p.Spec.NodeName+" ("+string(p.Status.Phase)+")")
			if p.Spec.NodeName != a.Name || p.Status.Phase != corev1.PodRunning {
				moved = false
			}
		}
		if moved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after draining %s, the Deployment's pods: %s; want %d running on %s", b.Name, strings.Join(where, ", "), replicas, a.Name)
		}
		time.Sleep(time.Second)
	}
	// Uncordoned, the node takes pods again.
	kubectl(t, "", "uncordon", b.Name)
	n, err := cs.CoreV1().Nodes().Get(ctx, b.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Errorf("node %s still cordoned after kubectl uncordon", b.Name)
	}
}
