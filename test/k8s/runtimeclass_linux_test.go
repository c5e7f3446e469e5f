//go:build linux

package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hypervOverhead is what docs/install-windows.md's runhcs-wcow-hypervisor RuntimeClass declares
// as each pod's fixed overhead (its utility VM).
var hypervOverhead = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("500m"),
	corev1.ResourceMemory: resource.MustParse("512Mi"),
}

// TestRuntimeClassOverhead: the Hyper-V RuntimeClass's overhead is set on its pods at admission
// (pod.spec.overhead) and counted against the node's allocatable: by the scheduler, which
// leaves a pod whose requests fit only without the overhead Pending, and by kubelet, which
// refuses such a pod bound to the node directly (spec.nodeName, past the scheduler) with
// OutOfcpu. The same requests in the process RuntimeClass fit and run.
func TestRuntimeClassOverhead(t *testing.T) {
	cs := client(t)
	applyRuntimeClasses(t, cs)
	rc, err := cs.NodeV1().RuntimeClasses().Get(context.Background(), "runhcs-wcow-hypervisor", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Overhead == nil || !equalResources(rc.Overhead.PodFixed, hypervOverhead) {
		t.Fatalf("RuntimeClass runhcs-wcow-hypervisor: overhead %+v, want podFixed %v", rc.Overhead, hypervOverhead)
	}
	node := windowsNode(t, cs)
	alloc := node.Status.Allocatable[corev1.ResourceCPU]
	// Requests that fit the node's CPU alone, but not with the overhead.
	req := alloc.DeepCopy()
	req.Sub(resource.MustParse("300m"))
	ns := namespace(t, cs)
	pod := func(name, class string, nodeName string) *corev1.Pod {
		p := workloadPod(name, "sleep", "3600")
		p.Spec.RuntimeClassName = &class
		p.Spec.NodeName = nodeName
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: req}
		return p
	}

	// The scheduler: Pending, "Insufficient cpu".
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod("hyperv", "runhcs-wcow-hypervisor", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalResources(created.Spec.Overhead, hypervOverhead) {
		t.Errorf("the Hyper-V pod's spec.overhead %v, want the RuntimeClass's %v", created.Spec.Overhead, hypervOverhead)
	}
	p := waitPod(t, cs, ns, "hyperv", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return p.Spec.NodeName != ""
	})
	if p.Spec.NodeName != "" {
		t.Errorf("the scheduler placed a pod needing %s CPU plus %s overhead on a node of %s", req.String(), hypervOverhead.Cpu(), alloc.String())
	} else if msg := scheduledMessage(p); !strings.Contains(msg, "Insufficient cpu") {
		t.Errorf("the Hyper-V pod is unschedulable for another reason: %s", msg)
	}
	cs.CoreV1().Pods(ns).Delete(context.Background(), "hyperv", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})

	// kubelet: the same pod bound directly is refused at admission.
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod("hyperv-bound", "runhcs-wcow-hypervisor", node.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, cs, ns, "hyperv-bound", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodRunning
	})
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "OutOfcpu" {
		t.Errorf("kubelet admitted a pod needing %s CPU plus %s overhead on %s allocatable: %s, reason %q",
			req.String(), hypervOverhead.Cpu(), alloc.String(), describe(p), p.Status.Reason)
	}

	// Without the overhead the same requests fit and run.
	startPod(t, cs, ns, pod("process", "runhcs-wcow-process", ""))
}

func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

// TestRuntimeClassScheduling: a RuntimeClass's scheduling.nodeSelector steers its pods: one
// selecting a Windows build no node has leaves the pod Pending; the documented ones put pods on
// the Windows node.
func TestRuntimeClassScheduling(t *testing.T) {
	cs := client(t)
	applyRuntimeClasses(t, cs)
	const name = "runhcs-test-other-build"
	rc := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Handler:    "runhcs-wcow-process",
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{
			corev1.LabelOSStable: "windows", "node.kubernetes.io/windows-build": "10.0.17763"}},
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	ns := namespace(t, cs)
	p := workloadPod("elsewhere", "sleep", "3600")
	class := name
	p.Spec.RuntimeClassName = &class
	p.Spec.NodeSelector = nil // the RuntimeClass alone steers it
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.NodeSelector["node.kubernetes.io/windows-build"] != "10.0.17763" {
		t.Errorf("admission did not merge the RuntimeClass's nodeSelector: %v", created.Spec.NodeSelector)
	}
	got := waitPod(t, cs, ns, "elsewhere", func(p *corev1.Pod) bool {
		return p.Spec.NodeName != "" || scheduledMessage(p) != ""
	})
	if got.Spec.NodeName != "" {
		t.Errorf("a pod for Windows build 10.0.17763 was placed on %s (build %s)", got.Spec.NodeName, windowsBuild)
	}

	// The documented class (no nodeSelector of the pod's own) lands on a Windows node.
	q := workloadPod("here", "sleep", "3600")
	class2 := "runhcs-wcow-process"
	q.Spec.RuntimeClassName = &class2
	q.Spec.NodeSelector = map[string]string{}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, cs, ns, "here", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	onWindows := false
	for _, n := range windowsNodes(t, cs) {
		onWindows = onWindows || n.Name == running.Spec.NodeName
	}
	if !onWindows {
		t.Errorf("the process-isolated pod ran on %q, not a Windows node", running.Spec.NodeName)
	}
}

// summaryStats is the part of kubelet's /stats/summary the test reads.
type summaryStats struct {
	Node struct {
		NodeName string `json:"nodeName"`
		CPU      struct {
			Time           time.Time `json:"time"`
			UsageNanoCores *uint64   `json:"usageNanoCores"`
		} `json:"cpu"`
		Memory struct {
			WorkingSetBytes *uint64 `json:"workingSetBytes"`
		} `json:"memory"`
	} `json:"node"`
	Pods []struct {
		PodRef struct {
			Name, Namespace string
		} `json:"podRef"`
		Containers []struct {
			Name string `json:"name"`
			CPU  struct {
				UsageCoreNanoSeconds *uint64 `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
			Memory struct {
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"containers"`
	} `json:"pods"`
}

// TestSummaryAPI: kubelet's summary API, read through the API server's node proxy as metrics
// servers and `kubectl get --raw` do, gives the Windows node's CPU and memory and, for a pod
// that burns CPU and holds memory, the container's CPU time and working set, which kubelet takes
// from CRI stats (containerd → the shim → hcsemu's figures for the container). The node's CPU
// rate (usageNanoCores, from \Processor(_Total)\% Processor Time through the stand-in pdh.dll)
// becomes non-zero while the pod spins and stays within the node's processors, and kubelet read
// every one of its counters meanwhile: a pod's new network adapter once failed the
// \Network Adapter(*) counters, and kubelet then kept none of the node's figures (the CPU rate
// read 0).
func TestSummaryAPI(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	kubeletLog := filepath.Join(nodeRoot(t), "logs", "kubelet.log")
	logStart := fileSize(t, kubeletLog)
	// 64 MiB held, then one core busy.
	p := workloadPod("busy", "alloc", "64", "3600")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
		Name: "spin", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{workload, "spin", "3600"},
	})
	running := startPod(t, cs, ns, p)
	// The node's figures are wanted from a collection after the pod's containers (and its
	// network adapter) came: kubelet collects every 10 s, and startedAt has a resolution of a
	// second.
	var started time.Time
	for _, c := range running.Status.ContainerStatuses {
		if c.State.Running != nil && c.State.Running.StartedAt.After(started) {
			started = c.State.Running.StartedAt.Time
		}
	}
	started = started.Add(time.Second)
	node := windowsNode(t, cs)
	var s summaryStats
	deadline := time.Now().Add(waitLong)
	for {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy/stats/summary").DoRaw(context.Background())
		if err != nil {
			t.Fatalf("/stats/summary through the node proxy: %v: %s", err, raw)
		}
		s = summaryStats{}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("/stats/summary: %v", err)
		}
		if ok, _ := summaryComplete(&s, ns); ok && s.Node.CPU.Time.After(started) && *s.Node.CPU.UsageNanoCores > 0 {
			break
		}
		if time.Now().After(deadline) {
			_, why := summaryComplete(&s, ns)
			t.Fatalf("/stats/summary: %s, node figures of %s after %s (want figures collected after %s with usageNanoCores > 0 while pod busy spins)",
				why, s.Node.CPU.Time, waitLong, started)
		}
		time.Sleep(2 * time.Second)
	}
	if s.Node.NodeName != node.Name {
		t.Errorf("summary's node %q, want %q", s.Node.NodeName, node.Name)
	}
	_, why := summaryComplete(&s, ns)
	t.Log(why)
	// % Processor Time is at most 100 (all processors busy), so kubelet's rate is at most the
	// node's processor count in cores (winstats convertCPUValue).
	cores := node.Status.Capacity.Cpu().Value()
	if n := *s.Node.CPU.UsageNanoCores; cores <= 0 || n > uint64(cores)*1e9 {
		t.Errorf("the node's usageNanoCores %d: want at most its %d processors' %d", n, cores, uint64(cores)*1e9)
	}
	b, err := os.ReadFile(kubeletLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b[min(logStart, int64(len(b))):]), "\n") {
		if strings.Contains(line, "perf counter data") {
			t.Errorf("kubelet failed to read a performance counter while the pod ran: %s", line)
		}
	}
}

// fileSize is the size of the file at path, 0 if it does not exist yet.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// summaryComplete says whether s has the node's figures and the busy pod's two containers with
// their CPU time and working set, the alloc one holding at least its 64 MiB.
func summaryComplete(s *summaryStats, ns string) (bool, string) {
	if s.Node.CPU.UsageNanoCores == nil || s.Node.Memory.WorkingSetBytes == nil || *s.Node.Memory.WorkingSetBytes == 0 {
		return false, "no node CPU or memory"
	}
	for _, p := range s.Pods {
		if p.PodRef.Namespace != ns || p.PodRef.Name != "busy" {
			continue
		}
		got := map[string]string{}
		for _, c := range p.Containers {
			if c.CPU.UsageCoreNanoSeconds == nil || c.Memory.WorkingSetBytes == nil {
				return false, "container " + c.Name + " without CPU or memory"
			}
			got[c.Name] = fmt.Sprintf("cpu %d ns, working set %d bytes", *c.CPU.UsageCoreNanoSeconds, *c.Memory.WorkingSetBytes)
			if c.Name == "main" && *c.Memory.WorkingSetBytes < 64<<20 {
				return false, "main's working set " + got[c.Name] + " is below its 64 MiB"
			}
			if c.Name == "spin" && *c.CPU.UsageCoreNanoSeconds == 0 {
				return false, "spin has no CPU time"
			}
		}
		if len(got) != 2 {
			return false, fmt.Sprintf("pod busy has containers %v", got)
		}
		return true, fmt.Sprintf("node: %d nano-cores, %d bytes; pod busy: %v", *s.Node.CPU.UsageNanoCores, *s.Node.Memory.WorkingSetBytes, got)
	}
	return false, "pod busy not in the summary"
}
