//go:build linux

package k8s

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
)

// TestMemoryLimit gives containers a memory limit (kubelet.exe's CRI MemoryLimitInBytes, the
// shim's HCS Container/Memory, a job object's limit on Windows and a cgroup under hcsemu) and
// has the workload allocate inside them, as test/cri's TestUpdateMemoryLimit does: an
// allocation that fits succeeds, one beyond the limit fails in the container, and without a limit
// the same allocation succeeds. Process isolated and with the Hyper-V RuntimeClass.
func TestMemoryLimit(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)
		limited := func(name, mb string) corev1.Container {
			c := workloadContainer(name, "alloc", mb)
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			return c
		}
		pod := windowsPod("limits", corev1.RestartPolicyNever,
			limited("fits", "8"), limited("exceeds", "128"), workloadContainer("unlimited", "alloc", "128"))
		pod.Spec.RuntimeClassName = rc
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

// cpuSample is a container's CPU figures in kubelet's summary API (k8s.io/kubelet
// pkg/apis/stats/v1alpha1 ContainerStats.CPU, the fields read here): kubelet.exe takes them from
// CRI stats, so from the shim's HCS statistics.
type cpuSample struct {
	Time                 time.Time `json:"time"`
	UsageCoreNanoSeconds uint64    `json:"usageCoreNanoSeconds"`
}

// containerCPU reads the summary API through the API server's node proxy and answers the CPU
// figures of container name of pod ns/pod, or false while there are none.
func containerCPU(t *testing.T, cs *kubernetes.Clientset, node, ns, pod, name string) (cpuSample, bool) {
	t.Helper()
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("summary API of node %s: %v: %s", node, err, b)
	}
	var sum struct {
		Pods []struct {
			PodRef struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"podRef"`
			Containers []struct {
				Name string     `json:"name"`
				CPU  *cpuSample `json:"cpu"`
			} `json:"containers"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatalf("summary API: %v", err)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Namespace != ns || p.PodRef.Name != pod {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == name && c.CPU != nil && !c.CPU.Time.IsZero() {
				return *c.CPU, true
			}
		}
	}
	return cpuSample{}, false
}

// cpuCores is a container's CPU use in cores between two summary readings at least window
// apart by their own timestamps (the node's clock, not the test's).
func cpuCores(t *testing.T, cs *kubernetes.Clientset, node, ns, pod, name string, window time.Duration) float64 {
	t.Helper()
	var first cpuSample
	deadline := time.Now().Add(waitLong)
	for {
		s, ok := containerCPU(t, cs, node, ns, pod, name)
		switch {
		case ok && first.Time.IsZero():
			first = s
		case ok && s.Time.Sub(first.Time) >= window:
			return float64(s.UsageCoreNanoSeconds-first.UsageCoreNanoSeconds) / float64(s.Time.Sub(first.Time).Nanoseconds())
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s of %s/%s: no CPU figures %s apart in the summary API after %s", name, ns, pod, window, waitLong)
		}
		time.Sleep(time.Second)
	}
}

// TestCPULimit gives a spinning container a CPU limit of 20m: kubelet.exe sends CRI's
// CpuMaximum (the limit as a share of the node's processors, in hundredths of a percent), the
// shim sets HCS's Container/Processor Maximum, which hcsemu enforces with the container's
// cgroup (cpu.max), and the container's CPU use in kubelet's summary API stays near 0.02 cores,
// well under what a spinner gets even on this shared, loaded machine (about 0.1 cores with a
// load average of 16 on 2 cores, measured). An unlimited spinner beside it is only logged: what
// it gets is the machine's load, not the test's to assert. Process isolated and with the Hyper-V RuntimeClass.
func TestCPULimit(t *testing.T) {
	cs := client(t)
	node := windowsNode(t, cs).Name
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)
		capped := workloadContainer("capped", "spin", "3600")
		capped.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}
		pod := windowsPod("cpu", corev1.RestartPolicyNever, capped, workloadContainer("free", "spin", "3600"))
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)
		waitPod(t, cs, ns, pod.Name, func(p *corev1.Pod) bool { return running(p, "capped") && running(p, "free") })
		got := cpuCores(t, cs, node, ns, pod.Name, "capped", 5*time.Second)
		free := cpuCores(t, cs, node, ns, pod.Name, "free", 5*time.Second)
		t.Logf("CPU use: capped at 20m %.3f cores, unlimited %.3f cores", got, free)
		// cpu.max holds the cap over every 100 ms period; the margin covers the readings'
		// own skew (their timestamps and counters are not taken at one instant).
		if got <= 0 || got > 0.04 {
			t.Errorf("container with a 20m CPU limit used %.3f cores, want about 0.02", got)
		}
	})
}
