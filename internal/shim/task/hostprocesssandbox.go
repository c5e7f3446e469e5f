package task

import (
	"context"
	"fmt"
	"sync"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/protocols/stats"
)

// HostProcessSandboxConfig is a HostProcess pod's sandbox task to create.
type HostProcessSandboxConfig struct {
	ID, Bundle string
	IO         stdio.Config
	// PodAnnotations are the HostProcess annotations the pod's containers inherit
	// (HostProcessSandbox.PodAnnotations).
	PodAnnotations map[string]string
}

// HostProcessSandbox is a HostProcess pod's sandbox task. It holds nothing and runs nothing:
// a HostProcess pod has the host's network (containerd's CRI makes none for it) and each of its
// containers is a job of its own (JobContainer), so there is nothing for a sandbox to keep, and
// the pause image's program, looked up on the host, would be no one's. hcsshim does the same:
// its pod.go gives a job-container pod a wcowPodSandboxTask with no container and no process.
// Its init is the sandbox's life (sandboxInit: pid 0, running from Start until killed); it takes
// no exec, lists no process of its own, reports empty statistics (CRI reports none for a
// HostProcess pod) and refuses Update.
type HostProcessSandbox struct {
	base
	podAnnotations map[string]string
	stopOnce       sync.Once
	stopped        chan struct{}
}

// CreateHostProcessSandbox creates a HostProcess pod's sandbox. Its bundle state says it holds
// nothing, so the delete action after a killed shim asks HCS for no compute system.
func CreateHostProcessSandbox(ctx context.Context, deps Deps, c HostProcessSandboxConfig) (*HostProcessSandbox, error) {
	if err := writeState(c.Bundle, &bundleState{HostProcessSandbox: true}); err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	t := &HostProcessSandbox{base: newBase(deps, c.ID, c.Bundle), podAnnotations: c.PodAnnotations, stopped: make(chan struct{})}
	t.init = newSandboxInit(deps, c.ID, c.IO, sandboxLife{
		what:  "the sandbox of a HostProcess pod",
		ended: t.stopped,
		stop:  t.stop,
	})
	log.G(ctx).WithField("task", c.ID).Info("HostProcess pod sandbox created: no container, no process")
	return t, nil
}

func (t *HostProcessSandbox) stop(context.Context) error {
	t.stopOnce.Do(func() { close(t.stopped) })
	return nil
}

// PodAnnotations are the HostProcess annotations this pod's containers inherit unless they set
// them (hcsshim's pod.go passes microsoft.com/hostprocess-inherit-user and …-rootfs-location
// through so, since Kubernetes gives annotations to the sandbox only).
func (t *HostProcessSandbox) PodAnnotations() map[string]string { return t.podAnnotations }

// Exec is refused, as hcsshim's wcowPodSandboxTask.CreateExec: there is no container to run in.
func (t *HostProcessSandbox) Exec(execID string, _ *specs.Process, _ stdio.Config) error {
	return fmt.Errorf("exec %q in task %s: the sandbox of a HostProcess pod is no container and runs nothing; exec in one of its containers: %w", execID, t.id, errdefs.ErrNotImplemented)
}

// Start starts the sandbox's life; it has no execs.
func (t *HostProcessSandbox) Start(ctx context.Context, execID string) (uint32, error) {
	return t.start(ctx, execID, nil)
}

// Pause is refused: there is nothing to pause.
func (t *HostProcessSandbox) Pause(context.Context) error {
	return fmt.Errorf("pause task %s: the sandbox of a HostProcess pod runs nothing: %w", t.id, errdefs.ErrNotImplemented)
}

// Resume is refused: it cannot be paused.
func (t *HostProcessSandbox) Resume(context.Context) error {
	return fmt.Errorf("resume task %s: the sandbox of a HostProcess pod cannot be paused: %w", t.id, errdefs.ErrNotImplemented)
}

// Delete removes the sandbox's state; it holds nothing else.
func (t *HostProcessSandbox) Delete(ctx context.Context, execID string) (Status, error) {
	return t.delete(ctx, execID, func(ctx context.Context) error {
		return release(ctx, t.deps, resources{bundle: t.bundle})
	})
}

// Pids lists the sandbox's init as hcsshim's does: pid 0, no process of the host.
func (t *HostProcessSandbox) Pids(context.Context) ([]*tasktypes.ProcessInfo, error) {
	return []*tasktypes.ProcessInfo{{Pid: 0}}, nil
}

// Update is refused, as hcsshim's (errTaskNotIsolated): the sandbox has no resources to limit;
// each container's job carries its own.
func (t *HostProcessSandbox) Update(context.Context, *specs.WindowsResources) error {
	return fmt.Errorf("update task %s: the sandbox of a HostProcess pod has no resources; update its containers: %w", t.id, errdefs.ErrNotImplemented)
}

// Stats are empty, as hcsshim's wcowPodSandboxTask.Stats for a pod without a VM.
func (t *HostProcessSandbox) Stats(context.Context) (*stats.Statistics, error) {
	return &stats.Statistics{}, nil
}
