//go:build linux

package k8s

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// webPort is where the workload's `http` serves in the tests' pods.
const webPort = 8080

// webDeployment is a Deployment of the workload's HTTP server on the Windows node, each pod
// Ready when kubelet's HTTP probe (from the node's host, through the HNS network to the pod's
// address) gets the page.
func webDeployment(name string, replicas int32, text string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  onWindowsNode(),
					TerminationGracePeriodSeconds: new(int64(5)),
					Containers: []corev1.Container{{
						Name: "web", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{workload, "http", fmt.Sprintf(":%d", webPort), text},
						Ports:   []corev1.ContainerPort{{ContainerPort: webPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(webPort)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
}

// waitRollout waits until the Deployment's controller has seen its latest generation and every
// replica is of the latest template, available and Ready, with no old pod left.
func waitRollout(t testing.TB, cs *kubernetes.Clientset, ns, name string) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(waitLong)
	var d *appsv1.Deployment
	for {
		var err error
		d, err = cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := d.Status
		want := *d.Spec.Replicas
		if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
			s.ReadyReplicas == want && s.AvailableReplicas == want {
			return d
		}
		if time.Now().After(deadline) {
			pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			var why []string
			for i := range pods.Items {
				why = append(why, pods.Items[i].Name+": "+describe(&pods.Items[i]))
			}
			t.Fatalf("deployment %s/%s: not rolled out after %s: %+v\n  %s", ns, name, waitLong, s, strings.Join(why, "\n  "))
		}
		time.Sleep(time.Second)
	}
}

// podsOf lists the pods of the Deployment's label app=NAME.
func podsOf(t testing.TB, cs *kubernetes.Clientset, ns, app string) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// TestDeployment runs a Deployment of 10 replicas on the (first) Windows node until all are Ready
// (kubelet's HTTP readiness probe reaching each pod), rolls it to new container arguments,
// then drains the node: every pod is evicted and the node holds no compute system, HNS endpoint
// or namespace, container mount, cgroup or shim process of them; uncordoned, the Deployment is
// Ready again.
func TestDeployment(t *testing.T) {
	cs := client(t)
	root := nodeRoot(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	node := windowsNode(t, cs).Name
	// Whatever happens, the node takes pods again after the test.
	t.Cleanup(func() { kubectlQuiet("uncordon", node) })

	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, webDeployment("web", 10, "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitRollout(t, cs, ns, "web")
	pods := podsOf(t, cs, ns, "web")
	if len(pods) != 10 {
		t.Fatalf("%d pods, want 10", len(pods))
	}
	ips := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != node || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q, IP %q; want %s and an address", p.Name, p.Spec.NodeName, p.Status.PodIP, node)
		}
		ips[p.Status.PodIP] = true
	}
	if len(ips) != 10 {
		t.Errorf("10 pods have %d distinct addresses: %v", len(ips), ips)
	}
	t.Logf("10 replicas Ready (generation %d)", d.Generation)

	// A rolling update: new arguments make a new ReplicaSet that replaces every pod.
	old := map[string]bool{}
	for _, p := range pods {
		old[p.Name] = true
	}
	d.Spec.Template.Spec.Containers[0].Command = webDeployment("web", 10, "v2").Spec.Template.Spec.Containers[0].Command
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, ns, "web")
	// The old pods are deleted by the rollout; wait until they are gone, not merely terminating.
	deadline := time.Now().Add(waitLong)
	for {
		pods = podsOf(t, cs, ns, "web")
		stale := 0
		for _, p := range pods {
			if old[p.Name] {
				stale++
			}
		}
		if stale == 0 && len(pods) == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rolling update: %d pods, %d of them old, after %s", len(pods), stale, waitLong)
		}
		time.Sleep(time.Second)
	}
	for _, p := range pods {
		if got := p.Spec.Containers[0].Command; got[len(got)-1] != "v2" {
			t.Errorf("pod %s after the rollout runs %q", p.Name, got)
		}
	}
	// The new page is what a pod serves: through the API server's pod proxy (control plane →
	// the node's pod network).
	body, err := cs.CoreV1().Pods(ns).ProxyGet("http", pods[0].Name, fmt.Sprint(webPort), "/", nil).DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), "v2") {
		t.Errorf("pod proxy %s:%d/: %q, %v; want the page v2", pods[0].Name, webPort, body, err)
	}

	drainNode(t, cs, node, root)
	// The Deployment's replacements wait, unscheduled, until the node takes pods again.
	kubectl(t, "", "uncordon", node)
	waitRollout(t, cs, ns, "web")
}

// drainNode drains the node (its folder root) with kubectl: it is cordoned, every pod is evicted
// (bare pods of other tests too: --force) but DaemonSets' (--ignore-daemonsets), none runs or
// waits there any more, and the node holds no compute system, HNS endpoint or namespace,
// container mount, cgroup, utility VM or shim process of them (waitNoResidue). It stays cordoned; the caller uncordons it.
func drainNode(t *testing.T, cs *kubernetes.Clientset, node, root string) {
	t.Helper()
	ctx := context.Background()
	kubectl(t, "", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period=5", "--timeout=5m")
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Errorf("node %s: not cordoned after kubectl drain", node)
	}
	all, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		if daemonSetPod(&p) {
			continue // kubectl drain --ignore-daemonsets leaves them: kube-proxy's among them
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
			t.Errorf("after drain, pod %s/%s is still on %s: %s", p.Namespace, p.Name, node, describe(&p))
		}
	}
	waitNoResidue(t, root)
}

// kubectlQuiet runs kubectl for a cleanup, where a failure has nothing to fail.
func kubectlQuiet(args ...string) { _ = exec.Command("kubectl", args...).Run() }

// TestPodTraffic checks traffic between two pods on the Windows node (one listens, the other
// connects to its address and reads the echo) and from the node to a pod (kubelet's HTTP
// readiness probe) and from the control plane (the API server's pod proxy).
func TestPodTraffic(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	server := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.PodSpec{
			NodeSelector:                  onWindowsNode(),
			TerminationGracePeriodSeconds: new(int64(5)),
			Containers: []corev1.Container{
				{Name: "echo", Image: testImage, Command: []string{workload, "listen", ":9000"}},
				webDeployment("x", 1, "from the server pod").Spec.Template.Spec.Containers[0],
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Ready: kubelet's HTTP probe from the node's host reached the pod (node → pod).
	s := waitPod(t, cs, ns, "server", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return p.Status.Phase == corev1.PodFailed
	})
	if s.Status.PodIP == "" || s.Status.Phase != corev1.PodRunning {
		t.Fatalf("server pod: %s, IP %q", describe(s), s.Status.PodIP)
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  onWindowsNode(),
			Containers: []corev1.Container{{Name: "connect", Image: testImage,
				Command: []string{workload, "connect", s.Status.PodIP + ":9000", "hello from the client pod"}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitPod(t, cs, ns, "client", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	out := kubectl(t, "", "logs", "-n", ns, "client")
	if c.Status.Phase != corev1.PodSucceeded || strings.TrimSpace(out) != "echo: hello from the client pod" {
		t.Errorf("client pod (%s → %s:9000): %s; logs %q, want the echo", c.Status.PodIP, s.Status.PodIP, describe(c), out)
	}
	if c.Status.PodIP == s.Status.PodIP {
		t.Errorf("client and server share the address %s", s.Status.PodIP)
	}
	// The control plane → the pod, through the API server's pod proxy.
	body, err := cs.CoreV1().Pods(ns).ProxyGet("http", "server", fmt.Sprint(webPort), "/", nil).DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), "from the server pod") {
		t.Errorf("pod proxy server:%d/: %q, %v", webPort, body, err)
	}
}

// daemonSetPod says whether a DaemonSet owns the pod, as kubectl drain tells the pods it leaves.
func daemonSetPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
