package k8s

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// HostProcess pods in the cluster (docs/hostprocess.md): how Windows clusters run node agents.

const (
	// hostProcessImage is the test image with the Windows build of the workload (test/winnode
	// HostProcessImage): a HostProcess container's processes run on the node's host.
	hostProcessImage = "docker.io/runhcs/test-windows:latest"
	// hostProcessPort is where the DaemonSet's server listens on each node's own address.
	hostProcessPort = 8091
)

// TestHostProcessDaemonSet runs a HostProcess DaemonSet, as clusters run kube-proxy or a CNI
// daemon: on every Windows node a Windows executable of its image serves HTTP on the node's own
// address (host network: the pod's IP is the node's), answering its node's name, and kubelet's
// readiness probe reaches it there. Deleting the DaemonSet ends every server.
func TestHostProcessDaemonSet(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	labels := map[string]string{"app": "hpc-agent"}
	hostProcess, user := true, `NT AUTHORITY\SYSTEM`
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "hpc-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelOSStable: "windows"},
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: new(int64),
					SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
						HostProcess: &hostProcess, RunAsUserName: &user}},
					Containers: []corev1.Container{{
						Name: "agent", Image: hostProcessImage, ImagePullPolicy: corev1.PullIfNotPresent,
						// The image's files are below %CONTAINER_SANDBOX_MOUNT_POINT% on the host,
						// which the runtime expands in the command line; kubelet expands $(NODE).
						Command: []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\workload\workload.exe`, "http",
							fmt.Sprintf(":%d", hostProcessPort), "agent on $(NODE)"},
						Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(hostProcessPort)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
	ctx := context.Background()
	if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := windowsNodes(t, cs)
	deadline := time.Now().Add(waitLong)
	for {
		d, err := cs.AppsV1().DaemonSets(ns).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.DesiredNumberScheduled == int32(len(nodes)) && d.Status.NumberReady == int32(len(nodes)) {
			break
		}
		if time.Now().After(deadline) {
			pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			var states []string
			for _, p := range pods.Items {
				states = append(states, describe(&p))
			}
			t.Fatalf("DaemonSet: %d of %d scheduled, %d ready, want %d Windows nodes; pods: %s", d.Status.DesiredNumberScheduled,
				len(nodes), d.Status.NumberReady, len(nodes), strings.Join(states, "; "))
		}
		time.Sleep(time.Second)
	}

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hpc-agent"})
	if err != nil {
		t.Fatal(err)
	}
	podOn := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		podOn[p.Spec.NodeName] = p
	}
	var addrs []string
	for _, n := range nodes {
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		p, ok := podOn[n.Name]
		if !ok {
			t.Errorf("no agent pod on node %s", n.Name)
			continue
		}
		if p.Status.PodIP != ip {
			t.Errorf("agent pod %s on %s: IP %s, want the node's %s (host network)", p.Name, n.Name, p.Status.PodIP, ip)
		}
		addr := net.JoinHostPort(ip, fmt.Sprint(hostProcessPort))
		addrs = append(addrs, addr)
		// From outside the node, at the node's own address: a process of the node's host.
		body, err := httpGet(fromHere, addr)
		if err != nil || strings.TrimSpace(body) != "agent on "+n.Name {
			t.Errorf("GET http://%s/ (node %s): %q, %v", addr, n.Name, body, err)
		}
	}

	if err := cs.AppsV1().DaemonSets(ns).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(waitLong)
	for _, addr := range addrs {
		for {
			if _, err := httpGet(fromHere, addr); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("http://%s/ still answers after the DaemonSet was deleted", addr)
			}
			time.Sleep(time.Second)
		}
	}
}
