//go:build linux

package k8s

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe is a probe of the given handler, run every second and failing at the first miss, so
// that a test waits for kubelet's reaction rather than for its thresholds.
func probe(h corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 5, FailureThreshold: 1, SuccessThreshold: 1}
}

func execProbe(args ...string) *corev1.Probe {
	return probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: append([]string{workload}, args...)}})
}

func httpProbe(port int) *corev1.Probe {
	return probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}})
}

func tcpProbe(port int) *corev1.Probe {
	return probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}})
}

// TestExecProbes drives a pod's exec probes (CRI ExecSync in the container) from files in a
// hostPath folder the test changes on the node: the readiness probe reads C:\flags\ready, the
// liveness probe C:\flags\alive. Ready follows the first file both ways without a restart; when
// the second goes, kubelet kills the container, starts it again and counts it in restartCount.
// Process isolated and with the Hyper-V RuntimeClass (the folder then a VSMB share).
func TestExecProbes(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)
		win, dir := nodeFolder(t, cs, ns)
		flag := func(name string, present bool) {
			t.Helper()
			p := filepath.Join(dir, name)
			if !present {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		flag("alive", true)

		c := workloadContainer("main", "sleep", "3600")
		c.ReadinessProbe = execProbe("read", `C:\flags\ready`)
		c.LivenessProbe = execProbe("read", `C:\flags\alive`)
		c.VolumeMounts = []corev1.VolumeMount{{Name: "flags", MountPath: `C:\flags`}}
		pod := windowsPod("exec-probes", corev1.RestartPolicyAlways, c)
		pod.Spec.Volumes = []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: win, Type: ptr(corev1.HostPathDirectory)}}}}
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)

		// Running, alive, and not Ready while the readiness probe fails.
		p := waitPod(t, cs, ns, pod.Name, func(p *corev1.Pod) bool { return running(p, "main") })
		if podReady(p) {
			t.Fatalf("pod Ready before C:\\flags\\ready exists: %s", describe(p))
		}
		flag("ready", true)
		waitPod(t, cs, ns, pod.Name, podReady)
		flag("ready", false)
		p = waitPod(t, cs, ns, pod.Name, func(p *corev1.Pod) bool { return !podReady(p) })
		if s := containerStatus(p, "main"); s == nil || s.State.Running == nil || s.RestartCount != 0 {
			t.Fatalf("readiness failing: the container should go on running, unrestarted: %s", describe(p))
		}

		// The liveness probe fails: kubelet restarts the container and counts it.
		flag("alive", false)
		p = waitPod(t, cs, ns, pod.Name, func(p *corev1.Pod) bool {
			s := containerStatus(p, "main")
			return s != nil && s.RestartCount >= 1
		})
		s := containerStatus(p, "main")
		if s.LastTerminationState.Terminated == nil {
			t.Errorf("restarted container without a last termination state: %s", describe(p))
		}
		// Alive and ready again: the restarted container keeps running with its count.
		flag("alive", true)
		flag("ready", true)
		p = waitPod(t, cs, ns, pod.Name, podReady)
		if s := containerStatus(p, "main"); s.RestartCount < 1 {
			t.Errorf("restartCount %d after a liveness failure, want at least 1", s.RestartCount)
		}
		// kubelet says why, in the pod's events.
		events, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var unhealthy, killing bool
		for _, e := range events.Items {
			unhealthy = unhealthy || e.Reason == "Unhealthy"
			killing = killing || e.Reason == "Killing"
		}
		if !unhealthy || !killing {
			t.Errorf("events: Unhealthy %v, Killing %v; want both", unhealthy, killing)
		}
	})
}

// TestNetworkProbes runs HTTP and TCP probes, which kubelet.exe makes from the node's host
// network namespace to the pod's IP (node-to-pod traffic through the HNS network): against the
// workload's http and listen servers they pass and the pod becomes Ready; against ports nothing
// listens on, the liveness probes fail and kubelet restarts each container. Process isolated
// and with the Hyper-V RuntimeClass (the pod's IP is then in its utility VM).
func TestNetworkProbes(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)

		web := workloadContainer("http", "http", ":8080", "ok")
		web.ReadinessProbe, web.LivenessProbe = httpProbe(8080), httpProbe(8080)
		tcp := workloadContainer("tcp", "listen", ":9000")
		tcp.ReadinessProbe, tcp.LivenessProbe = tcpProbe(9000), tcpProbe(9000)
		serving := windowsPod("serving", corev1.RestartPolicyAlways, web, tcp)
		serving.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, serving)

		// Same servers, probed on ports nothing listens on.
		webBad := workloadContainer("http", "http", ":8080", "ok")
		webBad.LivenessProbe = httpProbe(8081)
		tcpBad := workloadContainer("tcp", "listen", ":9000")
		tcpBad.LivenessProbe = tcpProbe(9001)
		failing := windowsPod("failing", corev1.RestartPolicyAlways, webBad, tcpBad)
		failing.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, failing)

		p := waitPod(t, cs, ns, "serving", podReady)
		for _, c := range []string{"http", "tcp"} {
			if s := containerStatus(p, c); s == nil || !s.Ready || s.RestartCount != 0 {
				t.Errorf("serving: container %s not ready or restarted: %s", c, describe(p))
			}
		}
		p = waitPod(t, cs, ns, "failing", func(p *corev1.Pod) bool {
			for _, c := range []string{"http", "tcp"} {
				if s := containerStatus(p, c); s == nil || s.RestartCount < 1 {
					return false
				}
			}
			return true
		})
		t.Logf("failing: restart counts http %d, tcp %d", containerStatus(p, "http").RestartCount, containerStatus(p, "tcp").RestartCount)
		// The serving pod's probes went on passing meanwhile.
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "serving", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !podReady(p) {
			t.Errorf("serving: not Ready any more: %s", describe(p))
		}
		for _, c := range []string{"http", "tcp"} {
			if s := containerStatus(p, c); s == nil || s.RestartCount != 0 {
				t.Errorf("serving: container %s restarted: %s", c, describe(p))
			}
		}
	})
}
