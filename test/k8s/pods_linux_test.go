//go:build linux

package k8s

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Helpers of the workload tests (probes, volumes, termination, limits, identity): pods of the
// test image for the Windows node, and what a test reads back from them.

// workloadContainer is a container of the test image that runs the workload with args.
func workloadContainer(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: append([]string{workload}, args...),
	}
}

// windowsPod is a pod for the Windows node (the nodeSelector a RuntimeClass would add) with
// the given restart policy and containers.
func windowsPod(name string, restart corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			NodeSelector:  onWindowsNode(),
			Containers:    containers,
		},
	}
}

// createPod creates pod in ns.
func createPod(t *testing.T, cs *kubernetes.Clientset, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
}

// podFinished says the pod ran to its end (restart policy Never or OnFailure).
func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// containerStatus is the status of the pod's container name, or nil.
func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// running says the pod's container name is running.
func running(p *corev1.Pod, name string) bool {
	s := containerStatus(p, name)
	return s != nil && s.State.Running != nil
}

// podLogs is a container's log through the API server (kubelet's containerLogs), with Windows
// line ends made "\n".
func podLogs(t *testing.T, cs *kubernetes.Clientset, ns, pod, container string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s container %s: %v: %s", ns, pod, container, err, b)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

// waitLogs reads a running container's log until it holds want (a line the workload prints
// once its handler is in place, "waiting" or "ignoring"), and fails after waitLong.
func waitLogs(t *testing.T, cs *kubernetes.Clientset, ns, pod, container, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
		if err == nil && strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs of %s/%s container %s: no %q after %s: %v: %q", ns, pod, container, want, waitLong, err, b)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// nodeDrive is the Linux folder that is the Windows node's C:\ (its Wine prefix's drive_c,
// test/winnode), where kubelet.exe makes hostPath volumes: a test puts files there as an
// administrator of the node would. The cluster's environment names its root
// (RUNHCS_CLUSTER_ROOT, test/cluster); the node lives in nodes/NAME under it.
func nodeDrive(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	root := os.Getenv("RUNHCS_CLUSTER_ROOT")
	if root == "" {
		t.Fatal("RUNHCS_CLUSTER_ROOT is not set: run the suite through hack/cluster.sh run")
	}
	drive := filepath.Join(root, "nodes", windowsNode(t, cs).Name, "wine", "prefix", "drive_c")
	if _, err := os.Stat(drive); err != nil {
		t.Fatalf("the Windows node's C:\\: %v", err)
	}
	return drive
}

// nodeFolder makes a folder of the node's C:\ for one test (removed at its end) and answers
// its Windows path (C:\runhcs-test\NAME) and its Linux path.
func nodeFolder(t *testing.T, cs *kubernetes.Clientset, name string) (win, linux string) {
	t.Helper()
	linux = filepath.Join(nodeDrive(t, cs), "runhcs-test", name)
	if err := os.MkdirAll(linux, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(linux) })
	return `C:\runhcs-test\` + name, linux
}

// ptr is a pointer to v, for the API's optional fields.
func ptr[T any](v T) *T { return &v }

// forEachIsolation runs f as a subtest per isolation, with the RuntimeClass a pod gets: none
// (the node's default handler, process isolation; subtest "default") and
// runhcs-wcow-hypervisor (a utility VM per pod). It applies the documented RuntimeClasses first.
func forEachIsolation(t *testing.T, cs *kubernetes.Clientset, f func(t *testing.T, runtimeClass *string)) {
	t.Helper()
	applyRuntimeClasses(t, cs)
	t.Run("default", func(t *testing.T) { f(t, nil) })
	t.Run("runhcs-wcow-hypervisor", func(t *testing.T) { f(t, ptr("runhcs-wcow-hypervisor")) })
}
