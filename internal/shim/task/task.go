package task

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/protocols/stats"
)

// execsExitTimeout bounds how long the end of the init process waits for the execs it killed.
const execsExitTimeout = 30 * time.Second

// Task is one task of a shim, of any kind: a process-isolated container (Container), a
// container hosted in its pod's utility VM (HostedContainer), a Hyper-V pod's sandbox, which is
// the pod's utility VM (VMSandbox), a Hyper-V task outside a pod, a container in a VM of its
// own (Standalone), a HostProcess container, a job object on the host (JobContainer), or a
// HostProcess pod's sandbox, which runs nothing (HostProcessSandbox). The
// task service calls these methods and nothing else; each kind answers them for what it is, so
// no caller asks which kind a task is. A new kind (a sandbox-API VM sandbox) is a new type that
// implements Task.
type Task interface {
	// ID is the task's id; Bundle its bundle folder.
	ID() string
	Bundle() string
	// Process returns the init process (execID "") or the exec execID.
	Process(execID string) (Proc, error)
	// Execs returns the task's execs, by exec id.
	Execs() []Proc
	// Exec adds the exec execID, created, not started; the init process must be running.
	Exec(execID string, spec *specs.Process, io stdio.Config) error
	// Start starts the init process (execID "") or an exec, publishes its start and watches
	// for its exit.
	Start(ctx context.Context, execID string) (uint32, error)
	// Kill signals the init process (execID "") or an exec; with all, every exec first.
	Kill(ctx context.Context, execID string, sig uint32, all bool) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Delete deletes an exec (execID not "") or, for "", the task and all it holds, and
	// returns the deleted process's final status. The caller forgets the task once Delete of
	// the init process succeeds.
	Delete(ctx context.Context, execID string) (Status, error)
	// Pids lists the task's processes; it answers quickly even when HCS is stuck.
	Pids(ctx context.Context) ([]*tasktypes.ProcessInfo, error)
	// Update applies new resource limits.
	Update(ctx context.Context, res *specs.WindowsResources) error
	// Stats returns the task's statistics, as containerd.runhcs.stats.v1 carries them.
	Stats(ctx context.Context) (*stats.Statistics, error)
}

var (
	_ Task = (*Container)(nil)
	_ Task = (*HostedContainer)(nil)
	_ Task = (*Standalone)(nil)
	_ Task = (*VMSandbox)(nil)
	_ Task = (*JobContainer)(nil)
	_ Task = (*HostProcessSandbox)(nil)
)

// base is what every kind of task shares: its identity, its init process and its execs, and
// the lifecycle operations on them that do not depend on the kind.
type base struct {
	deps   Deps
	id     string
	bundle string
	init   proc

	mu    sync.Mutex
	execs map[string]*Process
}

func newBase(deps Deps, id, bundle string) base {
	return base{deps: deps, id: id, bundle: bundle, execs: map[string]*Process{}}
}

// ID is the task's id.
func (b *base) ID() string { return b.id }

// Bundle is the task's bundle folder.
func (b *base) Bundle() string { return b.bundle }

func (b *base) taskID() string { return b.id }
func (b *base) taskDeps() Deps { return b.deps }

// process returns the init process (execID "") or the exec execID.
func (b *base) process(execID string) (proc, error) {
	if execID == "" {
		return b.init, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.execs[execID]
	if !ok {
		return nil, fmt.Errorf("exec %q of task %s: %w", execID, b.id, errdefs.ErrNotFound)
	}
	return p, nil
}

// Process returns the init process (execID "") or the exec execID.
func (b *base) Process(execID string) (Proc, error) {
	p, err := b.process(execID)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Execs returns the task's execs, by exec id.
func (b *base) Execs() []Proc {
	var out []Proc
	for _, e := range b.execList() {
		out = append(out, e)
	}
	return out
}

// execList returns the task's execs, by exec id.
func (b *base) execList() []*Process {
	b.mu.Lock()
	out := slices.Collect(maps.Values(b.execs))
	b.mu.Unlock()
	slices.SortFunc(out, func(a, c *Process) int { return cmp.Compare(a.execID, c.execID) })
	return out
}

// addExec adds the exec execID of host (the task's kind), created, not started; the task's
// init process must be running.
func (b *base) addExec(host processHost, execID string, spec *specs.Process, io stdio.Config) error {
	if err := b.init.lifecycle().ask(procState.canExec); err != nil {
		return fmt.Errorf("exec %q in task %s: %w", execID, b.id, err)
	}
	b.mu.Lock()
	if _, ok := b.execs[execID]; ok {
		b.mu.Unlock()
		return fmt.Errorf("exec %q in task %s: %w", execID, b.id, errdefs.ErrAlreadyExists)
	}
	b.execs[execID] = newProcess(host, execID, spec, io)
	b.mu.Unlock()
	b.deps.Events.Send(runtime.TaskExecAddedEventTopic, &eventstypes.TaskExecAdded{ContainerID: b.id, ExecID: execID})
	return nil
}

// start starts the init process (execID "") or an exec, publishes its start and watches for
// its exit; afterInitExit runs when the init process exited, before its exit is published.
func (b *base) start(ctx context.Context, execID string, afterInitExit func(context.Context)) (uint32, error) {
	p, err := b.process(execID)
	if err != nil {
		return 0, err
	}
	pid, err := p.start(ctx)
	if err != nil {
		return 0, err
	}
	var beforeExit func(context.Context)
	if execID == "" {
		if err := recordInitPid(b.bundle, pid); err != nil {
			// Only the delete action's report of the pid after a shim crash depends on it.
			log.G(ctx).WithError(err).WithField("task", b.id).Warn("recording the init pid in the task state")
		}
		b.deps.Events.Send(runtime.TaskStartEventTopic, &eventstypes.TaskStart{ContainerID: b.id, Pid: pid})
		beforeExit = afterInitExit
	} else {
		b.deps.Events.Send(runtime.TaskExecStartedEventTopic, &eventstypes.TaskExecStarted{ContainerID: b.id, ExecID: execID, Pid: pid})
	}
	// Watch only once the start event is queued, so a fast exit cannot overtake it.
	sctx := b.deps.Ctx
	go p.watch(log.WithLogger(sctx, p.logger(sctx)), beforeExit)
	return pid, nil
}

// Kill signals the init process (execID "") or an exec; with all, every exec first, then the
// init process.
func (b *base) Kill(ctx context.Context, execID string, sig uint32, all bool) error {
	p, err := b.process(execID)
	if err != nil {
		return err
	}
	if _, err := signalAction(sig); err != nil {
		return fmt.Errorf("kill %s: %w", p.ID(), err)
	}
	if all && execID == "" {
		for _, e := range b.execList() {
			if err := e.kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
				return err
			}
		}
	}
	return p.kill(ctx, sig)
}

// delete deletes an exec (execID not "") or, for "", the task: cleanup releases what the task
// holds, then the init process is deleted. A task whose execs are still live is not deleted.
func (b *base) delete(ctx context.Context, execID string, cleanup func(context.Context) error) (Status, error) {
	p, err := b.process(execID)
	if err != nil {
		return Status{}, err
	}
	if execID != "" {
		st, err := p.lifecycle().delete()
		if err != nil {
			return Status{}, fmt.Errorf("delete exec %q of task %s: %w", execID, b.id, err)
		}
		b.mu.Lock()
		delete(b.execs, execID)
		b.mu.Unlock()
		return st, nil
	}

	// Checked now, committed once the resources are released.
	if _, err := p.lifecycle().check(procState.delete); err != nil {
		return Status{}, fmt.Errorf("delete task %s: %w", b.id, err)
	}
	for _, e := range b.execList() {
		if err := e.ask(procState.canDeleteTask); err != nil {
			return Status{}, fmt.Errorf("delete task %s: exec %q: %w", b.id, e.execID, err)
		}
	}
	if err := cleanup(ctx); err != nil {
		return Status{}, fmt.Errorf("delete task %s: %w", b.id, err)
	}
	st, err := p.lifecycle().delete()
	if err != nil {
		// Deleted twice concurrently: the other Delete committed it first.
		p.logger(ctx).WithError(err).Debug("delete")
	}
	return st, nil
}

// killExecs kills the execs still running when the init process exited (an exec never
// started ends at once) and waits for their exits to be published, as hcsshim does: the task
// ends with its init process.
func (b *base) killExecs(ctx context.Context) {
	deadline := time.After(execsExitTimeout)
	for _, p := range b.execList() {
		if p.exited() {
			continue
		}
		if err := p.kill(ctx, sigKILL); err != nil && !errdefs.IsNotFound(err) {
			p.logger(ctx).WithError(err).Warn("kill exec after init exit")
		}
		select {
		case <-p.done:
		case <-deadline:
			p.logger(ctx).Error("exec did not exit after its container's init process")
		}
	}
}

// endCreated ends, once the task's utility VM stopped, every process of the task that the
// VM's exit does not end by itself: one never started (created) gets its TaskExit now, as a
// process killed before it ran (hcsshim's waitForHostExit force-exits them likewise). Running
// processes end through their own watch.
func (b *base) endCreated(ctx context.Context, vmExited <-chan struct{}) {
	select {
	case <-vmExited:
	case <-ctx.Done():
		return
	}
	procs := []proc{b.init}
	for _, e := range b.execList() {
		procs = append(procs, e)
	}
	for _, p := range procs {
		l := p.lifecycle()
		if err := l.ask(procState.canDeleteTask); err != nil {
			continue // live: its own watch records the exit
		}
		if l.exited() {
			continue
		}
		// created: ends at once (kill of a created process never reaches HCS).
		if err := p.kill(ctx, sigKILL); err != nil && !errdefs.IsNotFound(err) {
			p.logger(ctx).WithError(err).Debug("end after the utility VM exited")
		}
	}
}
