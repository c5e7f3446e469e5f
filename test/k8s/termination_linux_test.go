//go:build linux

package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// deleteAndWait deletes a running pod (with its own terminationGracePeriodSeconds), waits for
// kubelet to report its container's end and then for the pod to leave the API (kubelet deletes
// it once its volumes are torn down), and answers that status and the pod it came with.
func deleteAndWait(t *testing.T, cs *kubernetes.Clientset, ns, name, container string) (*corev1.ContainerStatus, *corev1.Pod) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, cs, ns, name, func(p *corev1.Pod) bool {
		s := containerStatus(p, container)
		return p.DeletionTimestamp != nil && s != nil && s.State.Terminated != nil
	})
	deadline := time.Now().Add(waitLong)
	for {
		_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s: still in the API %s after its container ended (%v)", ns, name, waitLong, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return containerStatus(p, container), p
}

// TestGracefulTermination deletes running pods: kubelet stops the container with
// CTRL_SHUTDOWN_EVENT (CRI StopContainer: SIGTERM, the shim's CtrlShutdown), which the
// workload's wait-signal handles and exits with its code; one that ignores it is killed once
// terminationGracePeriodSeconds have passed, not before. The first also fails with
// FallbackToLogsOnError, so its termination message is the tail of its log. Process isolated and
// with the Hyper-V RuntimeClass (the event then reaches a container in the pod's utility VM).
func TestGracefulTermination(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)

		graceful := workloadContainer("main", "wait-signal", "7")
		graceful.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		pod := windowsPod("graceful", corev1.RestartPolicyNever, graceful)
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(120))
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)

		const grace = 5
		stubborn := windowsPod("stubborn", corev1.RestartPolicyNever, workloadContainer("main", "ignore-signals"))
		stubborn.Spec.TerminationGracePeriodSeconds = ptr(int64(grace))
		stubborn.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, stubborn)

		for _, name := range []string{"graceful", "stubborn"} {
			waitPod(t, cs, ns, name, func(p *corev1.Pod) bool { return running(p, "main") })
		}
		// The handlers are in place once the lines are there.
		waitLogs(t, cs, ns, "graceful", "main", "waiting")
		waitLogs(t, cs, ns, "stubborn", "main", "ignoring")

		t.Run("signal", func(t *testing.T) {
			s, _ := deleteAndWait(t, cs, ns, "graceful", "main")
			term := s.State.Terminated
			if term.ExitCode != 7 {
				t.Errorf("exit code %d, want 7 (wait-signal's, after the signal): %+v", term.ExitCode, term)
			}
			if msg := strings.ReplaceAll(term.Message, "\r\n", "\n"); msg != "waiting\ngot SIGTERM\n" {
				t.Errorf("termination message %q, want the log %q (FallbackToLogsOnError)", msg, "waiting\ngot SIGTERM\n")
			}
		})
		t.Run("kill", func(t *testing.T) {
			s, p := deleteAndWait(t, cs, ns, "stubborn", "main")
			term := s.State.Terminated
			if term.ExitCode == 0 {
				t.Errorf("exit code 0 for a killed process: %+v", term)
			}
			// The pod's deletionTimestamp is the deletion plus its grace period: the kill may not
			// come before it (both clocks are this machine's; the times have whole seconds).
			if p.DeletionTimestamp == nil {
				t.Fatalf("no deletion timestamp: %s", describe(p))
			}
			if earliest := p.DeletionTimestamp.Add(-time.Second); term.FinishedAt.Time.Before(earliest) {
				t.Errorf("killed at %s, before the %d s grace period ended (%s)", term.FinishedAt, grace, p.DeletionTimestamp)
			}
		})
	})
}

// TestTerminationMessage reads the termination message as kubelet reports it: from the
// container's terminationMessagePath file (its default, /dev/termination-log, which kubelet
// mounts into the container), and with FallbackToLogsOnError from the log's tail when the
// container fails without writing the file, but not when it succeeds. Process isolated and with
// the Hyper-V RuntimeClass.
func TestTerminationMessage(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)

		file := workloadContainer("file", "write", `C:\dev\termination-log`, "bye from the file")
		custom := workloadContainer("custom", "write", `C:\status\message.txt`, "bye from a custom path")
		custom.TerminationMessagePath = `C:\status\message.txt`
		failing := workloadContainer("failing", "read", `C:\no\such\file`)
		failing.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		succeeding := workloadContainer("succeeding", "echo", "all is well")
		succeeding.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		pod := windowsPod("messages", corev1.RestartPolicyNever, file, custom, failing, succeeding)
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)

		p := waitPod(t, cs, ns, "messages", podFinished)
		for _, c := range []struct {
			name, want string
			code       int32
		}{
			{"file", "bye from the file", 0},
			{"custom", "bye from a custom path", 0},
			{"failing", "workload read: ", 1}, // the workload's error on stderr: a prefix
			{"succeeding", "", 0},
		} {
			s := containerStatus(p, c.name)
			if s == nil || s.State.Terminated == nil {
				t.Errorf("container %s not terminated: %s", c.name, describe(p))
				continue
			}
			term := s.State.Terminated
			msg := strings.ReplaceAll(term.Message, "\r\n", "\n")
			if term.ExitCode != c.code || !strings.HasPrefix(msg, c.want) || (c.want == "" && msg != "") {
				t.Errorf("container %s: exit code %d, message %q; want %d and %q", c.name, term.ExitCode, msg, c.code, c.want)
			}
		}
	})
}
