//go:build linux

package k8s

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// The streaming tests: what a user does with a running pod through the API server, which
// proxies to kubelet.exe's port 10250, which proxies to containerd.exe's streaming server on the
// node: kubectl logs -f and --previous, exec (with a TTY and its size), attach, port-forward.

// restConfig is the administrator's client configuration (the client's, for the streaming
// executors, which need it rather than a Clientset).
func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	client(t) // skips or fails as client does without a cluster
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startPod creates the pod on the Windows node in ns and waits until all its containers run.
func startPod(t testing.TB, cs *kubernetes.Clientset, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = onWindowsNode()
	}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitPod(t, cs, ns, pod.Name, func(p *corev1.Pod) bool {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod %s/%s ended: %s", ns, p.Name, describe(p))
		}
		return p.Status.Phase == corev1.PodRunning && podReady(p)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// workloadPod is a one-container pod of the test workload running args.
func workloadPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64), // 0: these pods need no graceful stop
			Containers: []corev1.Container{{
				Name: "main", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: append([]string{workload}, args...),
			}},
		},
	}
}

// TestLogsFollow: `kubectl logs -f` streams a running container's lines as it prints them and
// returns when the container ends; `kubectl logs --previous` prints the lines of the instance
// before a restart.
func TestLogsFollow(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	pod := workloadPod("ticker", "tick", "0.5", "6")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	startPod(t, cs, ns, pod)

	cmd := exec.Command("kubectl", "logs", "-f", "-n", ns, "ticker")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first line arrives while the container still runs: it is followed, not read at the end.
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if len(lines) == 0 {
			p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "ticker", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s := p.Status.ContainerStatuses; len(s) != 1 || s[0].State.Running == nil {
				t.Logf("the container was no longer running at the first followed line: %s (a slow machine; the rest still proves -f)", describe(p))
			}
		}
		lines = append(lines, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kubectl logs -f: %v: %s", err, stderr.String())
	}
	want := []string{"tick 1", "tick 2", "tick 3", "tick 4", "tick 5", "tick 6"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("kubectl logs -f: %q, want %q", lines, want)
	}

	// --previous: a container restarted by its failing liveness probe; the previous instance's
	// log is kept and served. (A container that ends by itself would not do: once two instances
	// are dead, kubelet's garbage collection keeps only the newest, --maximum-dead-containers-
	// per-container 1, and the restarted one may be dead already when kubectl asks.)
	crash := workloadPod("restarted", "tick", "0.5")
	crash.Spec.RestartPolicy = corev1.RestartPolicyAlways
	crash.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{workload, "exit", "1"}}},
		InitialDelaySeconds: 3, PeriodSeconds: 3, FailureThreshold: 1,
	}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), withNodeSelector(crash), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "restarted", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount >= 1 && s[0].LastTerminationState.Terminated != nil
	})
	out := kubectl(t, "", "logs", "--previous", "-n", ns, "restarted")
	if !strings.HasPrefix(strings.ReplaceAll(out, "\r\n", "\n"), "tick 1\ntick 2\n") {
		t.Errorf("kubectl logs --previous: %q, want the previous instance's ticks from tick 1", out)
	}
}

func withNodeSelector(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeSelector = onWindowsNode()
	return p
}

// execute runs a remote command (exec or attach) through the API server over WebSocket, as
// kubectl does, and answers what came out.
func execute(t *testing.T, cfg *rest.Config, req *rest.Request, opts remotecommand.StreamOptions) (string, string, error) {
	t.Helper()
	ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if opts.Stdout == nil {
		opts.Stdout = &stdout
	}
	if opts.Stderr == nil && !opts.Tty {
		opts.Stderr = &stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	err = ex.StreamWithContext(ctx, opts)
	return stdout.String(), stderr.String(), err
}

// sizes is a TerminalSizeQueue giving one size, then ending.
type sizes chan remotecommand.TerminalSize

func (s sizes) Next() *remotecommand.TerminalSize {
	sz, ok := <-s
	if !ok {
		return nil
	}
	return &sz
}

// TestExec: exec in a running container gives the command's output and exit code, stdin, and
// with a TTY a console of the size the client asks (kubectl exec -it).
func TestExec(t *testing.T) {
	cs := client(t)
	cfg := restConfig(t)
	ns := namespace(t, cs)
	startPod(t, cs, ns, workloadPod("target", "sleep", "3600"))
	execReq := func(tty, stdin bool, cmd ...string) *rest.Request {
		return cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("target").SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "main", Command: cmd, Stdin: stdin, Stdout: true, Stderr: !tty, TTY: tty}, scheme.ParameterCodec)
	}

	out, errOut, err := execute(t, cfg, execReq(false, false, workload, "echo", "exec works"), remotecommand.StreamOptions{})
	if err != nil || strings.TrimSpace(out) != "exec works" {
		t.Errorf("exec echo: %q (stderr %q), %v", out, errOut, err)
	}
	_, _, err = execute(t, cfg, execReq(false, false, workload, "exit", "3"), remotecommand.StreamOptions{})
	var exitErr interface{ ExitStatus() int }
	if err == nil || !asExit(err, &exitErr) || exitErr.ExitStatus() != 3 {
		t.Errorf("exec exit 3: %v, want exit status 3", err)
	}
	out, _, err = execute(t, cfg, execReq(false, true, workload, "cat"), remotecommand.StreamOptions{Stdin: strings.NewReader("through stdin\n")})
	if err != nil || strings.TrimSpace(out) != "through stdin" {
		t.Errorf("exec cat with stdin: %q, %v", out, err)
	}

	// With a TTY: the workload sees a console, then, after a line on stdin, prints its size.
	q := make(sizes, 1)
	q <- remotecommand.TerminalSize{Width: 100, Height: 30}
	close(q)
	pr, pw := io.Pipe()
	var tout syncBuffer
	done := make(chan error, 1)
	go func() {
		_, _, err := execute(t, cfg, execReq(true, true, workload, "tty", "size"), remotecommand.StreamOptions{
			Stdin: pr, Stdout: &tout, Tty: true, TerminalSizeQueue: q})
		done <- err
	}()
	waitFor(t, "the workload's tty line", func() bool { return strings.Contains(tout.String(), "tty") })
	if strings.Contains(tout.String(), "notty") {
		t.Fatalf("exec -t: the workload saw no console: %q", tout.String())
	}
	fmt.Fprint(pw, "\r\n")
	if err := <-done; err != nil {
		t.Errorf("exec -it: %v; output %q", err, tout.String())
	}
	pw.Close()
	if !regexp.MustCompile(`size 30 100`).MatchString(tout.String()) {
		t.Errorf("exec -it: output %q, want the console size 30 rows 100 columns", tout.String())
	}
}

func asExit(err error, target *interface{ ExitStatus() int }) bool {
	e, ok := err.(interface{ ExitStatus() int })
	if ok {
		*target = e
	}
	return ok
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (b *syncBuffer) lock() {
	if b.mu == nil {
		b.mu = make(chan struct{}, 1)
	}
	b.mu <- struct{}{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.lock()
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.lock()
	defer func() { <-b.mu }()
	return b.buf.String()
}

// waitFor polls cond until it holds (a hang guard, not a speed expectation).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitLong)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAttach: attach to a running container's stdin and stdout (kubectl attach -i): what the
// client sends reaches the container's main process, and its output comes back.
func TestAttach(t *testing.T) {
	cs := client(t)
	cfg := restConfig(t)
	ns := namespace(t, cs)
	pod := workloadPod("cat", "cat")
	pod.Spec.Containers[0].Stdin = true
	startPod(t, cs, ns, pod)
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("cat").SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "main", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	pr, pw := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		_, _, err := execute(t, cfg, req, remotecommand.StreamOptions{Stdin: pr, Stdout: &out})
		done <- err
	}()
	// Lines until one comes back: the attach may be established after the first write.
	deadline := time.Now().Add(waitLong)
	for i := 0; !strings.Contains(out.String(), "attached line"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("attach: no echo within %s; output %q", waitLong, out.String())
		}
		fmt.Fprintf(pw, "attached line %d\n", i)
		time.Sleep(500 * time.Millisecond)
	}
	pw.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("attach ended with %v after stdin closed", err)
		}
	case <-time.After(30 * time.Second):
		t.Log("attach still open 30 s after stdin closed (the container keeps running)")
	}
}

// TestPortForward: kubectl port-forward to a pod's port reaches the workload's HTTP server in
// the pod (API server → kubelet → containerd's streaming server → the pod's network).
func TestPortForward(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	web := workloadPod("web", "http", "0.0.0.0:8080", "served through port-forward")
	// Ready once kubelet (on the node's host network) reaches the server in the pod.
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	startPod(t, cs, ns, web)
	cmd := exec.Command("kubectl", "port-forward", "-n", ns, "pod/web", ":8080")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// "Forwarding from 127.0.0.1:PORT -> 8080"
	sc := bufio.NewScanner(stdout)
	var local string
	for sc.Scan() {
		if m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080`).FindStringSubmatch(sc.Text()); m != nil {
			local = m[1]
			break
		}
	}
	if local == "" {
		t.Fatalf("kubectl port-forward printed no local address: %s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	for i := 0; i < 3; i++ { // three connections in a row through one forward
		resp, err := http.Get("http://" + local + "/")
		if err != nil {
			t.Fatalf("GET through port-forward (%d): %v; kubectl: %s", i, err, stderr.String())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "served through port-forward") {
			t.Errorf("GET through port-forward (%d): %d %q", i, resp.StatusCode, b)
		}
	}
}
