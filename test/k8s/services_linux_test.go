//go:build linux

package k8s

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/openhcs/runhcs/internal/hcsemu"
	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// Services on the Windows node: kube-proxy.exe (winkernel) programs each into the node's HNS as
// load balancers, which hcsemu makes real forwarding; the cluster DNS is CoreDNS behind the
// kube-dns Service. The backends answer HTTP with their own pod name, so each request shows
// which backend served it.

// servicePort is the port the tests' Services listen on (the backends' is webPort).
const servicePort = 80

// namedWeb is a Deployment of HTTP servers on the Windows node that answer their pod's name.
func namedWeb(name string, replicas int32) *appsv1.Deployment {
	d := webDeployment(name, replicas, "$(POD_NAME)")
	c := &d.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	return d
}

// service makes a Service of the Deployment's pods, of type typ (ClusterIP, NodePort), or
// headless when headless is set.
func service(t testing.TB, cs *kubernetes.Clientset, ns, name, app string, typ corev1.ServiceType, headless bool) *corev1.Service {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: servicePort, TargetPort: intstr.FromInt32(webPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	s, err := cs.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clientPod is a pod on the Windows node that idles, for the tests to exec requests in.
func clientPod(t testing.TB, cs *kubernetes.Clientset, ns string) string {
	t.Helper()
	startPod(t, cs, ns, workloadPod("client", "sleep", "3600"))
	return "client"
}

// inPod runs the workload with args in the pod (kubectl exec) and gives its output and error.
func inPod(ns, pod string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"exec", "-n", ns, pod, "--", workload}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl exec %s %s: %v: %s", pod, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), err
}

// httpGet GETs http://addr/ with a connection dialled by dial, and gives the body.
func httpGet(dial func(network, addr string) (net.Conn, error), addr string) (string, error) {
	c, err := dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	head, body, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok || !strings.Contains(head, " 200 ") {
		return "", fmt.Errorf("GET http://%s/: %q", addr, b)
	}
	return body, nil
}

// fromHere dials from the tests' own network namespace: the cluster's network, outside the
// node, as another machine on the node's network would.
func fromHere(network, addr string) (net.Conn, error) {
	return net.DialTimeout(network, addr, 5*time.Second)
}

// fromNodeHost dials from the (first) Windows node's host (the emulated host's network
// namespace), as a host process (kubelet's probes, a HostProcess pod) would.
func fromNodeHost(t testing.TB) func(network, addr string) (net.Conn, error) {
	return fromHostOf(t, firstNode)
}

// fromHostOf dials from the host of the Windows node NAME.
func fromHostOf(t testing.TB, name string) func(network, addr string) (net.Conn, error) {
	root := filepath.Join(nodeRootOf(t, name), "emu")
	return func(network, addr string) (net.Conn, error) {
		var c net.Conn
		err := hcsemu.InHostNetns(root, func() (err error) {
			c, err = net.DialTimeout(network, addr, 5*time.Second)
			return err
		})
		return c, err
	}
}

// requests GETs http://addr/ n times with dial and gives the bodies, sorted.
func requests(dial func(network, addr string) (net.Conn, error), addr string, n int) ([]string, error) {
	var got []string
	for range n {
		body, err := httpGet(dial, addr)
		if err != nil {
			return got, err
		}
		got = append(got, body)
	}
	slices.Sort(got)
	return got, nil
}

// checkSpread asserts that every answer is one of the backends and that every backend answered.
func checkSpread(t *testing.T, what string, got []string, backends []string) bool {
	t.Helper()
	seen := map[string]bool{}
	for _, b := range got {
		if !slices.Contains(backends, b) {
			t.Errorf("%s: an answer from %q, not one of the backends %v (all: %v)", what, b, backends, got)
			return false
		}
		seen[b] = true
	}
	if len(seen) != len(backends) {
		t.Errorf("%s: %d requests reached %d of the %d backends %v: %v", what, len(got), len(seen), len(backends), backends, got)
		return false
	}
	return true
}

// logLoadBalancers logs, for a failed check, the load balancers of the Windows node name's HNS
// whose frontend is vip, with their endpoints: whether kube-proxy had programmed every backend
// by then, or the requests were spread unevenly over a complete one.
func logLoadBalancers(t *testing.T, name, vip string) {
	t.Helper()
	c, err := emuclient.DialHNS(filepath.Join(nodeRootOf(t, name), "hcsemu.sock"))
	if err != nil {
		t.Logf("node %s's HNS: %v", name, err)
		return
	}
	defer c.Close()
	lbs, err := hns.NewClient(c).ListLoadBalancers(context.Background(), hns.Filter{})
	if err != nil {
		t.Logf("node %s's load balancers: %v", name, err)
		return
	}
	for _, lb := range lbs {
		if slices.Contains(lb.FrontendVIPs, vip) {
			t.Logf("node %s: load balancer %s for %v, %d endpoints: %v", name, lb.Id, lb.FrontendVIPs, len(lb.HostComputeEndpoints), lb.HostComputeEndpoints)
		}
	}
}

// podNames are the names of the Deployment's running, Ready pods, sorted.
func podNames(t testing.TB, cs *kubernetes.Clientset, ns, app string) []string {
	t.Helper()
	var names []string
	for _, p := range podsOf(t, cs, ns, app) {
		if p.DeletionTimestamp == nil && podReady(&p) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// podIPs are the addresses of the Deployment's running, Ready pods, sorted.
func podIPs(t testing.TB, cs *kubernetes.Clientset, ns, app string) []string {
	t.Helper()
	var ips []string
	for _, p := range podsOf(t, cs, ns, app) {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	slices.Sort(ips)
	return ips
}

// waitReadyEndpoints waits until the Service's EndpointSlices hold exactly n ready endpoints,
// and answers when they did.
func waitReadyEndpoints(t testing.TB, cs *kubernetes.Clientset, ns, svc string, n int) time.Time {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready++
				}
			}
		}
		if ready == n {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("service %s/%s: %d ready endpoints after %s, want %d", ns, svc, ready, waitLong, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// settleTime is how long after its endpoints change a Service must send to exactly the new
// ones, on every node (issue 23: no stale backend after 5 s). kube-proxy programs HNS on its own
// schedule: a Service that answers may still have an older set of backends (observed: a
// ClusterIP checked as soon as it answered reached only the first of its 3 pods to be Ready).
const settleTime = 5 * time.Second

// settle waits until settleTime after changed, when the endpoints were seen to change.
func settle(changed time.Time) { time.Sleep(time.Until(changed.Add(settleTime))) }

// waitServing waits until a GET of addr through dial succeeds: kube-proxy has programmed the
// Service's load balancer on the node.
func waitServing(t testing.TB, what string, dial func(network, addr string) (net.Conn, error), addr string) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		_, err := httpGet(dial, addr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s does not answer after %s: %v", what, addr, waitLong, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestServices: a Deployment of 3 backends behind a ClusterIP, a NodePort and a headless
// Service on the Windows node. The ClusterIP answers from a pod and from the node's host, the
// NodePort from the host and from outside the node (the cluster network), each spreading its
// requests over all 3 backends; the headless Service resolves to the 3 pod addresses. Scaled
// down to 1 and up to 3, the Services follow: 5 s after the endpoints changed, no request
// reaches a removed backend, and every new one gets requests. kube-proxy restarted programs
// them all again. Deleted, they leave no load balancer in the node's HNS.
func TestServices(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, namedWeb("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cip := service(t, cs, ns, "web", "web", corev1.ServiceTypeClusterIP, false)
	np := service(t, cs, ns, "web-np", "web", corev1.ServiceTypeNodePort, false)
	service(t, cs, ns, "web-headless", "web", corev1.ServiceTypeClusterIP, true)
	client := clientPod(t, cs, ns)
	waitRollout(t, cs, ns, "web")
	settle(waitReadyEndpoints(t, cs, ns, "web", 3))
	backends := podNames(t, cs, ns, "web")
	node := windowsNode(t, cs)
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	clusterAddr := net.JoinHostPort(cip.Spec.ClusterIP, fmt.Sprint(servicePort))
	nodePortAddr := net.JoinHostPort(nodeIP, fmt.Sprint(np.Spec.Ports[0].NodePort))
	host := fromNodeHost(t)

	waitServing(t, "ClusterIP from the node's host", host, clusterAddr)
	t.Run("ClusterIPFromPod", func(t *testing.T) {
		out, err := inPod(ns, client, "get", "http://"+clusterAddr+"/", "30")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		checkSpread(t, "ClusterIP "+clusterAddr+" from a pod", strings.Fields(out), backends)
	})
	t.Run("ClusterIPFromHost", func(t *testing.T) {
		got, err := requests(host, clusterAddr, 30)
		if err != nil {
			t.Fatalf("ClusterIP %s from the node's host: %v (answers so far: %v)", clusterAddr, err, got)
		}
		checkSpread(t, "ClusterIP "+clusterAddr+" from the node's host", got, backends)
	})
	t.Run("NodePortFromOutside", func(t *testing.T) {
		waitServing(t, "NodePort from the cluster network", fromHere, nodePortAddr)
		got, err := requests(fromHere, nodePortAddr, 30)
		if err != nil {
			t.Fatalf("NodePort %s from the cluster network: %v (answers so far: %v)", nodePortAddr, err, got)
		}
		checkSpread(t, "NodePort "+nodePortAddr+" from the cluster network", got, backends)
	})
	t.Run("NodePortFromHost", func(t *testing.T) {
		got, err := requests(host, nodePortAddr, 30)
		if err != nil {
			t.Fatalf("NodePort %s from the node's host: %v (answers so far: %v)", nodePortAddr, err, got)
		}
		checkSpread(t, "NodePort "+nodePortAddr+" from the node's host", got, backends)
	})
	t.Run("Headless", func(t *testing.T) {
		out, err := inPod(ns, client, "resolve", "web-headless")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Fields(out), podIPs(t, cs, ns, "web"); !slices.Equal(got, want) {
			t.Errorf("web-headless resolves to %v, want the pods' addresses %v", got, want)
		}
	})
	t.Run("Scale", func(t *testing.T) {
		scale := func(n int32) time.Time {
			t.Helper()
			sc, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sc.Spec.Replicas = n
			if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitRollout(t, cs, ns, "web")
			return waitReadyEndpoints(t, cs, ns, "web", int(n))
		}
		settle(scale(1))
		left := podNames(t, cs, ns, "web")
		got, err := requests(host, clusterAddr, 20)
		if err != nil {
			t.Fatalf("after scaling to 1: %v (answers so far: %v)", err, got)
		}
		checkSpread(t, "5 s after scaling to 1", got, left)
		settle(scale(3))
		got, err = requests(host, clusterAddr, 30)
		if err != nil {
			t.Fatalf("after scaling to 3: %v (answers so far: %v)", err, got)
		}
		checkSpread(t, "5 s after scaling to 3", got, podNames(t, cs, ns, "web"))
	})
	// kube-proxy killed and started again (Restart-Service kube-proxy, or its DaemonSet pod
	// deleted) deletes every load balancer at start and programs the Services again: once it
	// has synced, the Services answer as before.
	t.Run("KubeProxyRestart", func(t *testing.T) {
		restartKubeProxy(t, cs)
		backends := podNames(t, cs, ns, "web")
		got, err := requests(host, clusterAddr, 30)
		if err != nil {
			t.Fatalf("ClusterIP after kube-proxy's restart: %v (answers so far: %v)", err, got)
		}
		checkSpread(t, "ClusterIP after kube-proxy's restart", got, backends)
		got, err = requests(fromHere, nodePortAddr, 30)
		if err != nil {
			t.Fatalf("NodePort after kube-proxy's restart: %v (answers so far: %v)", err, got)
		}
		checkSpread(t, "NodePort after kube-proxy's restart", got, backends)
	})
	// Deleted, the Services leave no load balancer in the node's HNS (Get-HnsLoadBalancer
	// on a Windows node) and stop answering.
	t.Run("Deleted", func(t *testing.T) {
		ours := func() []string {
			var found []string
			for _, lb := range nodeLoadBalancers(t) {
				for _, pm := range lb.PortMappings {
					if slices.Contains(lb.FrontendVIPs, cip.Spec.ClusterIP) || (len(lb.FrontendVIPs) == 0 && pm.ExternalPort == uint16(np.Spec.Ports[0].NodePort)) {
						found = append(found, fmt.Sprintf("%s %v:%d", lb.Id, lb.FrontendVIPs, pm.ExternalPort))
					}
				}
			}
			return found
		}
		if len(ours()) == 0 {
			t.Fatal("no load balancer of the Services in HNS before their deletion")
		}
		for _, name := range []string{"web", "web-np", "web-headless"} {
			if err := cs.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(waitLong)
		for left := ours(); len(left) > 0; left = ours() {
			if time.Now().After(deadline) {
				t.Fatalf("%s after the Services' deletion, HNS still holds their load balancers: %v", waitLong, left)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if body, err := httpGet(host, clusterAddr); err == nil {
			t.Errorf("the deleted ClusterIP %s still answers: %q", clusterAddr, body)
		}
		if body, err := httpGet(fromHere, nodePortAddr); err == nil {
			t.Errorf("the deleted NodePort %s still answers: %q", nodePortAddr, body)
		}
	})
}

// nodeLoadBalancers lists the load balancers in the Windows node's HNS.
func nodeLoadBalancers(t testing.TB) []hcn.HostComputeLoadBalancer {
	t.Helper()
	c, err := emuclient.DialHNS(filepath.Join(nodeRoot(t), "hcsemu.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lbs, err := hns.NewClient(c).ListLoadBalancers(context.Background(), hns.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return lbs
}

// TestServicesAcrossNodes: a Service whose 4 backends are spread over both Windows nodes. From
// a pod on each node its ClusterIP reaches all 4 (each node's kube-proxy makes the other node's
// backends remote endpoints, routed over the physical network), and its NodePort at one node's
// address, asked from the other node's host, reaches all 4 too; with externalTrafficPolicy:
// Local only that node's 2. With sessionAffinity: ClientIP one client keeps one backend.
func TestServicesAcrossNodes(t *testing.T) {
	cs := client(t)
	a, b := twoNodes(t, cs)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, spreadOverNodes(namedWeb("web", 4)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cip := service(t, cs, ns, "web", "web", corev1.ServiceTypeClusterIP, false)
	np := service(t, cs, ns, "web-np", "web", corev1.ServiceTypeNodePort, false)
	for _, n := range []corev1.Node{a, b} {
		startPod(t, cs, ns, onNode(workloadPod("client-"+n.Name, "sleep", "3600"), n.Name))
	}
	waitRollout(t, cs, ns, "web")
	settle(waitReadyEndpoints(t, cs, ns, "web", 4))
	backends := podNames(t, cs, ns, "web")
	perNode := map[string]int{}
	for _, p := range podsOf(t, cs, ns, "web") {
		perNode[p.Spec.NodeName]++
	}
	if perNode[a.Name] != 2 || perNode[b.Name] != 2 {
		t.Fatalf("backends per node %v, want 2 on each of %s and %s", perNode, a.Name, b.Name)
	}
	clusterAddr := net.JoinHostPort(cip.Spec.ClusterIP, fmt.Sprint(servicePort))
	for _, n := range []corev1.Node{a, b} {
		waitServing(t, "ClusterIP from "+n.Name+"'s host", fromHostOf(t, n.Name), clusterAddr)
		out, err := inPod(ns, "client-"+n.Name, "get", "http://"+clusterAddr+"/", "40")
		if err != nil {
			t.Errorf("ClusterIP from a pod on %s: %v\n%s", n.Name, err, out)
			continue
		}
		if !checkSpread(t, "ClusterIP "+clusterAddr+" from a pod on "+n.Name, strings.Fields(out), backends) {
			logLoadBalancers(t, n.Name, cip.Spec.ClusterIP)
		}
	}
	// The NodePort at b's address, from a's host: another machine on the node's network.
	var bIP string
	for _, addr := range b.Status.Addresses {
		if addr.Type == corev1.NodeInternalIP {
			bIP = addr.Address
		}
	}
	nodePortAddr := net.JoinHostPort(bIP, fmt.Sprint(np.Spec.Ports[0].NodePort))
	fromA := fromHostOf(t, a.Name)
	waitServing(t, "NodePort of "+b.Name+" from "+a.Name, fromA, nodePortAddr)
	got, err := requests(fromA, nodePortAddr, 40)
	if err != nil {
		t.Fatalf("NodePort %s from %s's host: %v (answers so far: %v)", nodePortAddr, a.Name, err, got)
	}
	checkSpread(t, "NodePort "+nodePortAddr+" from "+a.Name+"'s host", got, backends)

	// externalTrafficPolicy: Local: b's NodePort sends only to b's own backends (kube-proxy
	// gives HNS the local endpoints only).
	local := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-local"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "http", Port: servicePort, TargetPort: intstr.FromInt32(webPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	local, err = cs.CoreV1().Services(ns).Create(ctx, local, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var onB []string
	for _, p := range podsOf(t, cs, ns, "web") {
		if p.Spec.NodeName == b.Name {
			onB = append(onB, p.Name)
		}
	}
	slices.Sort(onB)
	localAddr := net.JoinHostPort(bIP, fmt.Sprint(local.Spec.Ports[0].NodePort))
	waitServing(t, "eTP Local NodePort of "+b.Name, fromA, localAddr)
	got, err = requests(fromA, localAddr, 30)
	if err != nil {
		t.Fatalf("externalTrafficPolicy: Local NodePort %s from %s: %v (answers so far: %v)", localAddr, a.Name, err, got)
	}
	checkSpread(t, "externalTrafficPolicy: Local NodePort "+localAddr+" (only "+b.Name+"'s backends)", got, onB)

	// sessionAffinity: ClientIP: every request of one client reaches the same backend.
	sticky := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-sticky"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: servicePort, TargetPort: intstr.FromInt32(webPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	sticky, err = cs.CoreV1().Services(ns).Create(ctx, sticky, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stickyAddr := net.JoinHostPort(sticky.Spec.ClusterIP, fmt.Sprint(servicePort))
	waitServing(t, "ClientIP-affinity ClusterIP from "+a.Name, fromA, stickyAddr)
	got, err = requests(fromA, stickyAddr, 20)
	if err != nil {
		t.Fatalf("ClientIP-affinity ClusterIP %s: %v (answers so far: %v)", stickyAddr, err, got)
	}
	if len(slices.Compact(slices.Clone(got))) != 1 || !slices.Contains(backends, got[0]) {
		t.Errorf("sessionAffinity: ClientIP: 20 requests from one host reached %v, want one backend throughout", slices.Compact(got))
	}
}
