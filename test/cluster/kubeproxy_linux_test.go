//go:build linux

package main

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestKubeProxyObjects checks the DaemonSet's objects as the API server and the node read them:
// a HostProcess pod on the host's network as SYSTEM, on Windows nodes only, whatever their
// taints, with kube-proxy.exe and its kubeconfig named through %CONTAINER_SANDBOX_MOUNT_POINT%
// (which the runtime expands; kubelet expands only $(NODE_NAME)), and a kubeconfig whose token
// and CA resolve, relative to the kubeconfig's own folder, to the service-account volume.
func TestKubeProxyObjects(t *testing.T) {
	objs, err := kubeProxyObjects(kubeProxyImage("v1.37.2"))
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					NodeSelector       map[string]string
					HostNetwork        bool
					ServiceAccountName string
					Tolerations        []map[string]string
					SecurityContext    struct {
						WindowsOptions struct {
							HostProcess   bool
							RunAsUserName string
						}
					}
					Containers []struct {
						Image        string
						Command      []string
						Args         []string
						VolumeMounts []struct{ MountPath string }
					}
				}
			}
		}
	}
	var cm struct{ Data map[string]string }
	var paths []string
	for _, o := range objs {
		paths = append(paths, o.path)
		switch {
		case strings.HasSuffix(o.path, "/daemonsets"):
			err = json.Unmarshal([]byte(o.body), &ds)
		case strings.HasSuffix(o.path, "/configmaps"):
			err = json.Unmarshal([]byte(o.body), &cm)
		default:
			err = json.Unmarshal([]byte(o.body), &map[string]any{})
		}
		if err != nil {
			t.Fatalf("%s: %v", o.path, err)
		}
	}
	if want := "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"; !slices.Contains(paths, want) {
		t.Errorf("objects %v: no ClusterRoleBinding (%s)", paths, want)
	}
	p := ds.Spec.Template.Spec
	if !p.HostNetwork || !p.SecurityContext.WindowsOptions.HostProcess || p.SecurityContext.WindowsOptions.RunAsUserName != `NT AUTHORITY\SYSTEM` {
		t.Errorf("pod: hostNetwork %v, hostProcess %v, user %q; want a HostProcess pod on the host's network as SYSTEM", p.HostNetwork, p.SecurityContext.WindowsOptions.HostProcess, p.SecurityContext.WindowsOptions.RunAsUserName)
	}
	if p.NodeSelector["kubernetes.io/os"] != "windows" || p.ServiceAccountName != "kube-proxy" || len(p.Tolerations) != 1 || p.Tolerations[0]["operator"] != "Exists" {
		t.Errorf("pod: nodeSelector %v, serviceAccountName %q, tolerations %v", p.NodeSelector, p.ServiceAccountName, p.Tolerations)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("containers: %d, want 1", len(p.Containers))
	}
	c := p.Containers[0]
	if c.Image != "docker.io/runhcs/kube-proxy:v1.37.2" || len(c.Command) != 1 || c.Command[0] != `%CONTAINER_SANDBOX_MOUNT_POINT%\kube-proxy\kube-proxy.exe` {
		t.Errorf("container: image %q, command %q", c.Image, c.Command)
	}
	for _, want := range []string{"--proxy-mode=kernelspace", "--network-name=winnode", "--hostname-override=$(NODE_NAME)",
		`--kubeconfig=%CONTAINER_SANDBOX_MOUNT_POINT%\var\lib\kube-proxy\kubeconfig.conf`, "--cluster-cidr=" + clusterPodCIDR} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/lib/kube-proxy" {
		t.Errorf("volume mounts %+v: want the kubeconfig's at /var/lib/kube-proxy", c.VolumeMounts)
	}
	kc := cm.Data["kubeconfig.conf"]
	for _, f := range []string{"token", "ca.crt"} {
		// The paths as client-go resolves them: against the kubeconfig's folder, the mount path.
		var rel string
		for _, line := range strings.Split(kc, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && (k == "tokenFile" || k == "certificate-authority") && strings.HasSuffix(v, "/"+f) {
				rel = v
			}
		}
		if got := path.Join("/var/lib/kube-proxy", rel); got != "/var/run/secrets/kubernetes.io/serviceaccount/"+f {
			t.Errorf("kubeconfig's %s %q resolves to %s, want the service account's", f, rel, got)
		}
	}
}
