//go:build windows

package cri

import (
	"context"
	"fmt"
	"strings"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
)

// stillRunning is how containerd's CRI refuses to remove a container whose exit it has not
// finished handling (pkg/cri/server/container_remove.go in 1.7.35, internal/cri/server in 2.x).
const stillRunning = "container is still running"

// removePodSandbox removes a stopped pod as kubelet does: kubelet's garbage collector stops and
// removes a dead pod's sandbox, and when the removal fails it tries again on its next pass
// (pkg/kubelet/kuberuntime/kuberuntime_gc.go, removeSandbox). It retries only the refusal
// above, which containerd 1.7 gives now and then right after StopPodSandbox of a pod whose app
// container has just exited on its own, by a race inside containerd:
//
//   - its exit handler (pkg/cri/server/events.go, handleContainerExit) deletes the task and only
//     then marks the container exited; task.Delete drops the task from containerd's task list
//     as soon as the shim's Delete returns (runtime/v2/shim.go, shimTask.delete), then closes
//     the task's shim connection and waits for the close callback, which runs the shim binary's
//     `delete` command (cleanupAfterDeadShim), and deletes the bundle;
//   - a StopPodSandbox in that window finds the container running but its task gone and skips
//     it without waiting for the exit handler (container_stop.go, stopContainer: a NotFound
//     task of a running container returns nil), and RemovePodSandbox, which stops the pod again
//     the same way, then meets the container still marked running.
//
// That window is containerd's alone (after the shim has answered Delete), so hcsshim's shim
// meets it too. It returns how many times it retried, for the caller to report.
func removePodSandbox(ctx context.Context, rt internalapi.RuntimeService, id string) (retries int, err error) {
	for {
		err = rt.RemovePodSandbox(ctx, id)
		if err == nil || !strings.Contains(err.Error(), stillRunning) {
			return retries, err
		}
		retries++
		select {
		case <-ctx.Done():
			return retries, fmt.Errorf("RemovePodSandbox %s, %d retries: %w (last: %v)", id, retries, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
