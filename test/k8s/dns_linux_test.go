//go:build linux

package k8s

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's DNS (CoreDNS, tools/coredns) serves cluster.local and is the kube-dns Service
// (10.96.0.10); kubelet gives pods that server and their namespace's search suffix, and the
// Windows resolver in the container uses one suffix and takes a name with a dot as fully
// qualified (Kubernetes' "DNS for Services and Pods", Windows nodes).
const (
	kubernetesServiceIP = "10.96.0.1"
	clusterDomain       = "cluster.local"
)

// resolveIn resolves name in the pod and gives its addresses, or the error.
func resolveIn(ns, pod, name string) ([]string, error) {
	out, err := inPod(ns, pod, "resolve", name)
	return strings.Fields(out), err
}

// TestClusterDNS: a Windows pod resolves Services by Windows' rules: a single label gets the
// pod's namespace suffix (`web`, and `kubernetes` from the default namespace), a fully
// qualified name resolves, and a name with a dot is not completed (`web.NS`,
// `kubernetes.default`); a pod with a hostname and subdomain resolves by its host name, and
// every pod by its address-based name.
func TestClusterDNS(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, namedWeb("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := service(t, cs, ns, "web", "web", corev1.ServiceTypeClusterIP, false)
	service(t, cs, ns, "sub", "named", corev1.ServiceTypeClusterIP, true)
	named := workloadPod("named", "sleep", "3600")
	named.Labels = map[string]string{"app": "named"}
	named.Spec.Hostname, named.Spec.Subdomain = "host1", "sub"
	named = startPod(t, cs, ns, named)
	client := clientPod(t, cs, ns)

	fqdn := "web." + ns + ".svc." + clusterDomain
	for _, c := range []struct {
		name string
		want []string // nil: must not resolve
	}{
		{"web", []string{web.Spec.ClusterIP}},
		{fqdn, []string{web.Spec.ClusterIP}},
		{"web." + ns, nil},
		{"host1.sub." + ns + ".svc." + clusterDomain, []string{named.Status.PodIP}},
		{strings.ReplaceAll(named.Status.PodIP, ".", "-") + "." + ns + ".pod." + clusterDomain, []string{named.Status.PodIP}},
	} {
		got, err := resolveIn(ns, client, c.name)
		switch {
		case c.want == nil && err == nil:
			t.Errorf("%s resolved to %v; Windows takes a name with a dot as fully qualified, so it must not", c.name, got)
		case c.want != nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && !slices.Equal(got, c.want):
			t.Errorf("%s resolves to %v, want %v", c.name, got, c.want)
		}
	}

	// From the default namespace, as the and Kubernetes' Windows DNS examples put it.
	pod := workloadPod("dns-client-"+ns, "sleep", "3600")
	startPod(t, cs, "default", pod)
	t.Cleanup(func() {
		cs.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	for _, c := range []struct {
		name string
		want []string
	}{
		{"kubernetes", []string{kubernetesServiceIP}},
		{"kubernetes.default.svc." + clusterDomain, []string{kubernetesServiceIP}},
		{"kubernetes.default", nil},
	} {
		got, err := resolveIn("default", pod.Name, c.name)
		switch {
		case c.want == nil && err == nil:
			t.Errorf("%s resolved to %v from the default namespace; Windows does not complete a name with a dot", c.name, got)
		case c.want != nil && err != nil:
			t.Errorf("%s from the default namespace: %v", c.name, err)
		case c.want != nil && !slices.Equal(got, c.want):
			t.Errorf("%s resolves to %v from the default namespace, want %v", c.name, got, c.want)
		}
	}
}
