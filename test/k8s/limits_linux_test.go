//go:build linux

package k8s

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestMemoryLimit gives containers a memory limit (kubelet.exe's CRI MemoryLimitInBytes, the
// shim's HCS Container/Memory, a job object's limit on Windows and a cgroup under hcsemu) and
// has the workload allocate inside them, as test/cri's TestUpdateMemoryLimit does: an
// allocation that fits succeeds, one beyond the limit fails in the container, and without a limit
// the same allocation succeeds. Process isolated and with the Hyper-V RuntimeClass.
func TestMemoryLimit(t *testing.T) {
	cs := client(t)
	applyRuntimeClasses(t, cs)
	for _, rc := range []string{"", "runhcs-wcow-hypervisor"} {
		name := rc
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ns := namespace(t, cs)
			limited := func(name, mb string) corev1.Container {
				c := workloadContainer(name, "alloc", mb)
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
				return c
			}
			pod := windowsPod("limits", corev1.RestartPolicyNever,
				limited("fits", "8"), limited("exceeds", "128"), workloadContainer("unlimited", "alloc", "128"))
			if rc != "" {
				pod.Spec.RuntimeClassName = &rc
			}
			createPod(t, cs, ns, pod)
			p := waitPod(t, cs, ns, pod.Name, podFinished)
			for _, c := range []struct {
				name string
				ok   bool
			}{{"fits", true}, {"exceeds", false}, {"unlimited", true}} {
				s := containerStatus(p, c.name)
				if s == nil || s.State.Terminated == nil {
					t.Errorf("container %s did not end: %s", c.name, describe(p))
					continue
				}
				code := s.State.Terminated.ExitCode
				if (code == 0) != c.ok {
					t.Errorf("container %s: exit code %d (%s); want success %v: %s", c.name, code, s.State.Terminated.Reason, c.ok, describe(p))
				}
				if c.ok {
					if got := podLogs(t, cs, ns, pod.Name, c.name); !strings.HasPrefix(got, "allocated ") {
						t.Errorf("container %s: log %q", c.name, got)
					}
				}
			}
		})
	}
}
