//go:build linux

package k8s

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// containerIDs maps each pod of app=NAME to its container's ID and restart count, and fails
// unless every pod is Running and Ready.
func runningContainers(t *testing.T, cs *kubernetes.Clientset, ns, app string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, p := range podsOf(t, cs, ns, app) {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("pod %s: %s", p.Name, describe(&p))
		}
		c := p.Status.ContainerStatuses[0]
		ids[p.Name] = fmt.Sprintf("%s restarts=%d ready=%v", c.ContainerID, c.RestartCount, c.Ready)
	}
	return ids
}

// checkAdopted waits until the pods of app=NAME are all Ready again and then checks they are
// the same pods with the same containers, never restarted.
func checkAdopted(t *testing.T, cs *kubernetes.Clientset, ns, app string, before map[string]string) {
	t.Helper()
	waitRollout(t, cs, ns, app)
	after := runningContainers(t, cs, ns, app)
	for name, was := range before {
		if now, ok := after[name]; !ok {
			t.Errorf("pod %s is gone (was %s)", name, was)
		} else if now != was {
			t.Errorf("pod %s: %s, was %s: the container was replaced or restarted", name, now, was)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d pods after, %d before: %v", len(after), len(before), after)
	}
}

// waitNodeReady waits until the Node is Ready and the kubelet has renewed its lease
// (kube-node-lease, every 10 s) after since: the restarted kubelet is the one speaking, not the
// old one's last word (the Node's own status is posted only every 5 minutes when unchanged).
func waitNodeReady(t *testing.T, cs *kubernetes.Clientset, name string, since time.Time) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(waitLong)
	for {
		ready, renewed := false, false
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
		}
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time.After(since)
		}
		if ready && renewed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: Ready %v, lease renewed after %s %v, within %s (%v)", name, ready, since.Format(time.RFC3339), renewed, waitLong, err)
		}
		time.Sleep(time.Second)
	}
}

// TestRecovery restarts the node's services under running pods: kubelet.exe (killed and started
// again with the same flags, `winnode restart kubelet`) adopts the pods it finds, and after
// containerd.exe is restarted (`winnode restart containerd`) containerd reconnects to the shims
// and kubelet to containerd; in both cases the pods keep running with the same containers and no
// restart (a shim lost would have taken its pod's containers with it), and a new pod runs after
// each.
func TestRecovery(t *testing.T) {
	cs := client(t)
	root := nodeRoot(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	node := windowsNode(t, cs).Name
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, webDeployment("web", 3, "recovery"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, ns, "web")
	before := runningContainers(t, cs, ns, "web")

	for _, svc := range []string{"kubelet", "containerd"} {
		t.Run(svc, func(t *testing.T) {
			start := time.Now()
			t.Logf("%s", winnode(t, root, "restart", svc))
			waitNodeReady(t, cs, node, start)
			checkAdopted(t, cs, ns, "web", before)
			// The node still runs new pods: scale up by one.
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			*d.Spec.Replicas++
			if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitRollout(t, cs, ns, "web")
			before = runningContainers(t, cs, ns, "web")
		})
	}
}
