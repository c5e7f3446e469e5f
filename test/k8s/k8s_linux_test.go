//go:build linux

package k8s

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/openhcs/runhcs/internal/testenv"
)

// The emulated node's facts (test/winnode, test/image).
const (
	testImage = "docker.io/runhcs/test:latest" // the node's registry mirrors every registry
	workload  = `C:\workload\workload.exe`
	// windowsBuild is the emulated host's build: hcsemu's --os-version and the prefix's registry.
	windowsBuild = "10.0.20348"
	// kubeVersion is the release tools/kubernetes pins.
	kubeVersion = "v1.37.2"
	// waitLong bounds what a shared 2-core machine with Wine underneath may take: not a
	// performance assertion, a hang detector.
	waitLong = 5 * time.Minute
)

func client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		if testenv.InCI() {
			t.Fatal("KUBECONFIG is not set: run the suite on the cluster (make test-cluster)")
		}
		t.Skip("no cluster: run through hack/cluster.sh run (make test-cluster)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = "runhcs-test-k8s"
	// Above client-go's default of 5 requests a second, which would pace the benchmarks'
	// bursts of creations (100 Services took 18 s) rather than measure the cluster.
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// firstNode is the cluster's first Windows node (hack/cluster.sh names node K winnode-K, in
// DIR/nodes/winnode-K). The tests of what users do with pods on a node run their pods there
// (onWindowsNode), so that they hold on a cluster of one node or more; the tests across nodes
// are in nodes_linux_test.go.
const firstNode = "winnode-1"

// onWindowsNode is the nodeSelector of the single-node tests' pods: a Windows node (what a
// RuntimeClass's scheduling adds) and of those firstNode.
func onWindowsNode() map[string]string {
	return map[string]string{corev1.LabelOSStable: "windows", corev1.LabelHostname: firstNode}
}

// windowsNode is the cluster's first Windows node, firstNode, where the single-node tests' pods
// run; its folder is nodeRoot's.
func windowsNode(t *testing.T, cs *kubernetes.Clientset) *corev1.Node {
	t.Helper()
	for _, n := range windowsNodes(t, cs) {
		if n.Name == firstNode {
			return &n
		}
	}
	t.Fatalf("no Windows node %s (hack/cluster.sh names the first one so)", firstNode)
	return nil
}

// kubectl runs the cluster's kubectl (hack/cluster.sh puts the pinned one first on PATH).
func kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// TestControlPlane checks the control plane is the pinned release, healthy, and that kubectl
// (the pinned Linux build) reaches it with the cluster's kubeconfig.
func TestControlPlane(t *testing.T) {
	cs := client(t)
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != kubeVersion {
		t.Errorf("API server version %s, want %s", v.GitVersion, kubeVersion)
	}
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("/readyz: %v: %s", err, body)
	}
	out := kubectl(t, "", "version", "-o", "json")
	for _, want := range []string{`"gitVersion": "` + kubeVersion + `"`} {
		if strings.Count(out, want) != 2 { // client and server
			t.Errorf("kubectl version: want %s for client and server:\n%s", want, out)
		}
	}
	// The controller manager made the default namespace's ServiceAccount and root CA ConfigMap
	// (pods need both), and the scheduler is running (its lease-free health is its log; a Pod
	// scheduled is TestPodLogs).
	ctx := context.Background()
	deadline := time.Now().Add(waitLong)
	for {
		_, errSA := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		_, errCM := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if errSA == nil && errCM == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller manager did not make default/default (%v) and default/kube-root-ca.crt (%v)", errSA, errCM)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNode checks the Node kubelet.exe registered on each Windows node: the labels kubelet sets
// on Windows, Ready, the figures a Windows Server 2022 node reports (kubelet's
// pkg/kubelet/winstats: the OS image is the registry's ProductName, the kernel version the build
// and UBR), and its place on the cluster's networks (address and podCIDR, checkNodeNetwork).
// With two nodes (hack/cluster.sh up --windows-nodes 2) it checks both.
func TestNode(t *testing.T) {
	cs := client(t)
	nodes := windowsNodes(t, cs)
	if len(nodes) == 0 {
		t.Fatal("no Windows node")
	}
	windowsNode(t, cs) // the first one is there
	for i := range nodes {
		t.Run(nodes[i].Name, func(t *testing.T) {
			checkNode(t, &nodes[i])
			checkNodeNetwork(t, &nodes[i])
		})
	}
}

// checkNode checks what kubelet.exe reports of a Windows node.
func checkNode(t *testing.T, n *corev1.Node) {
	if got := n.Labels[corev1.LabelWindowsBuild]; got != windowsBuild {
		t.Errorf("label %s = %q, want %q", corev1.LabelWindowsBuild, got, windowsBuild)
	}
	if got := n.Labels[corev1.LabelArchStable]; got != "amd64" {
		t.Errorf("label %s = %q, want amd64", corev1.LabelArchStable, got)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				t.Errorf("node %s not Ready: %s: %s", n.Name, c.Reason, c.Message)
			}
		}
	}
	if !ready {
		t.Errorf("node %s has no Ready=True condition: %+v", n.Name, n.Status.Conditions)
	}
	info := n.Status.NodeInfo
	if info.OperatingSystem != "windows" || info.Architecture != "amd64" {
		t.Errorf("node OS/arch %s/%s, want windows/amd64", info.OperatingSystem, info.Architecture)
	}
	if info.OSImage != "Windows Server 2022 Datacenter" {
		t.Errorf("OS image %q, want Windows Server 2022 Datacenter", info.OSImage)
	}
	if !strings.HasPrefix(info.KernelVersion, windowsBuild+".") {
		t.Errorf("kernel version %q, want %s.<UBR>", info.KernelVersion, windowsBuild)
	}
	if info.KubeletVersion != kubeVersion {
		t.Errorf("kubelet version %q, want %s", info.KubeletVersion, kubeVersion)
	}
	want := map[string]string{"2": "containerd://2.4.2", "1.7": "containerd://1.7.35"}[os.Getenv("RUNHCS_CLUSTER_CONTAINERD")]
	if want == "" {
		want = "containerd://"
	}
	if !strings.HasPrefix(info.ContainerRuntimeVersion, want) {
		t.Errorf("container runtime version %q, want %s", info.ContainerRuntimeVersion, want)
	}
	t.Logf("node %s: %s, kernel %s, %s, kubelet %s, InternalIP %v", n.Name, info.OSImage, info.KernelVersion,
		info.ContainerRuntimeVersion, info.KubeletVersion, n.Status.Addresses)
}

// docsRuntimeClasses is the YAML of docs/install-windows.md's "Kubernetes: a RuntimeClass per
// handler": the suite applies exactly what users are told to apply.
func docsRuntimeClasses(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	page := filepath.Join(filepath.Dir(file), "..", "..", "docs", "install-windows.md")
	if p := os.Getenv("RUNHCS_INSTALL_DOC"); p != "" {
		page = p
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("docs/install-windows.md (RUNHCS_INSTALL_DOC names it when the suite runs from elsewhere): %v", err)
	}
	_, rest, ok := strings.Cut(string(b), "## Kubernetes: a RuntimeClass per handler")
	if !ok {
		t.Fatalf("%s: no section \"Kubernetes: a RuntimeClass per handler\"", page)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatalf("%s: no yaml block in \"Kubernetes: a RuntimeClass per handler\"", page)
	}
	y, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: unterminated yaml block", page)
	}
	return y
}

// applyRuntimeClasses applies the documented RuntimeClasses (idempotent: kubectl apply).
func applyRuntimeClasses(t testing.TB, cs *kubernetes.Clientset) {
	t.Helper()
	kubectl(t, docsRuntimeClasses(t), "apply", "-f", "-")
	for _, name := range []string{"runhcs-wcow-process", "runhcs-wcow-hypervisor"} {
		rc, err := cs.NodeV1().RuntimeClasses().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("RuntimeClass %s: %v", name, err)
		}
		if rc.Handler != name {
			t.Errorf("RuntimeClass %s: handler %q, want %q (containerd's Windows handler names)", name, rc.Handler, name)
		}
		if rc.Scheduling == nil || rc.Scheduling.NodeSelector[corev1.LabelOSStable] != "windows" {
			t.Errorf("RuntimeClass %s: scheduling %+v, want a nodeSelector on %s=windows", name, rc.Scheduling, corev1.LabelOSStable)
		}
	}
}

// TestRuntimeClasses applies the two documented RuntimeClasses (docs/install-windows.md).
func TestRuntimeClasses(t *testing.T) {
	applyRuntimeClasses(t, client(t))
}

// namespace makes a namespace for one test, removed at its end, and waits for its default
// ServiceAccount (the controller manager makes it; a Pod cannot be admitted before).
func namespace(t testing.TB, cs *kubernetes.Clientset) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = fmt.Sprintf("%s-%d", strings.Trim(name, "-"), time.Now().UnixNano()%100000)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	deadline := time.Now().Add(waitLong)
	for {
		if _, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return name
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s: no default ServiceAccount after %s", name, waitLong)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPod watches the pod until done says it is where the test wants it, and answers it.
func waitPod(t testing.TB, cs *kubernetes.Clientset, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			continue
		}
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
			if done(p) {
				return p
			}
		}
	}
	t.Fatalf("pod %s/%s: not there after %s; last seen: %s", ns, name, waitLong, describe(last))
	return nil
}

func describe(p *corev1.Pod) string {
	if p == nil {
		return "never"
	}
	s := fmt.Sprintf("phase %s, node %q", p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			s += fmt.Sprintf("; %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated: %d %s %s", c.Name, c.State.Terminated.ExitCode, c.State.Terminated.Reason, c.State.Terminated.Message)
		}
	}
	return s
}

// TestPodLogs runs a pod in each RuntimeClass (and in none, the node's default handler): the
// workload prints a line and exits 0, the pod Succeeds on the Windows node, and `kubectl logs`
// (API server → kubelet.exe → the CRI log file containerd wrote) prints the line.
func TestPodLogs(t *testing.T) {
	cs := client(t)
	applyRuntimeClasses(t, cs)
	for _, rc := range []string{"", "runhcs-wcow-process", "runhcs-wcow-hypervisor"} {
		name := rc
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ns := namespace(t, cs)
			line := "hello from " + name
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "logs"},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  onWindowsNode(),
					Containers: []corev1.Container{{
						Name: "main", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{workload, "echo", line},
					}},
				},
			}
			if rc != "" {
				pod.Spec.RuntimeClassName = &rc
			}
			if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitPod(t, cs, ns, "logs", func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			})
			if p.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("pod %s/logs: %s", ns, describe(p))
			}
			out := kubectl(t, "", "logs", "-n", ns, "logs")
			if strings.TrimSpace(strings.ReplaceAll(out, "\r\n", "\n")) != line {
				t.Errorf("kubectl logs: %q, want %q", out, line)
			}
		})
	}
}
