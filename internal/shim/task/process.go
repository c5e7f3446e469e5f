package task

import (
	"context"
	"fmt"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
)

// exitCodeUnknown is reported when HCS cannot tell a process's exit code (the service went
// away, or the process never ran); containerd uses 255 for the same purpose.
const exitCodeUnknown = 255

// exitCodeKilledCreated is the exit code of a process killed before it was started (hcsshim
// reports 1 for it, as Windows does for a terminated process).
const exitCodeKilledCreated = 1

// Process is a task's init process (exec id "") or one of its execs. Its state and what
// belongs to it are guarded by mu, which only this file takes; every change of state goes
// through transition.
type Process struct {
	task   *Task
	execID string
	spec   *specs.Process
	io     stdio.Config

	mu         sync.Mutex
	state      procState
	pid        uint32
	hp         HCSProcess
	relay      *stdio.Relay
	exitStatus uint32
	exitedAt   time.Time

	exitOnce sync.Once
	done     chan struct{} // closed once the exit was recorded and its TaskExit published
}

func newProcess(t *Task, execID string, spec *specs.Process, io stdio.Config) *Process {
	return &Process{task: t, execID: execID, spec: spec, io: io, state: createdState{}, done: make(chan struct{})}
}

// ID is the process's id in events: the exec id, or the container id for the init process.
func (p *Process) ID() string {
	if p.execID == "" {
		return p.task.id
	}
	return p.execID
}

// ExecID is the exec id, "" for the init process.
func (p *Process) ExecID() string { return p.execID }

// IO is the stdio the client set up for the process.
func (p *Process) IO() stdio.Config { return p.io }

func (p *Process) logger(ctx context.Context) *log.Entry {
	e := log.G(ctx).WithField("task", p.task.id)
	if p.execID != "" {
		e = e.WithField("exec", p.execID)
	}
	return e
}

// transition applies one operation of the current state and commits its result. p.mu is held.
func (p *Process) transition(op func(procState) (procState, error)) error {
	next, err := op(p.state)
	if err != nil {
		return err
	}
	p.state = next
	return nil
}

// ask returns the current state's answer to a question (canExec, canDeleteTask).
func (p *Process) ask(question func(procState) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return question(p.state)
}

// check reports whether op is legal now, without committing it: for an operation whose HCS
// call is made without the lock and committed afterwards with commitFrom.
func (p *Process) check(op func(procState) (procState, error)) (from procState, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = op(p.state)
	return p.state, err
}

// commitFrom commits op, checked legal from the state from, unless the state changed since
// (the process exited meanwhile: stopped wins). It reports whether op was committed.
func (p *Process) commitFrom(from procState, op func(procState) (procState, error)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == from && p.transition(op) == nil
}

// delete commits the delete transition and returns the final status.
func (p *Process) delete() (Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.transition(procState.delete)
	return p.statusLocked().deletedStatus(), err
}

// Status is a process's state as the task API reports it.
type Status struct {
	State      string // the lifecycle state: created, starting, running, paused, stopped, deleted
	Status     tasktypes.Status
	Pid        uint32
	ExitStatus uint32
	ExitedAt   time.Time // zero until it exited
}

// Status returns the process's current status.
func (p *Process) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *Process) statusLocked() Status {
	return Status{State: p.state.String(), Status: p.state.Status(), Pid: p.pid, ExitStatus: p.exitStatus, ExitedAt: p.exitedAt}
}

// deletedStatus is the status Delete reports: a process deleted without ever running reports
// now as its exit time.
func (st Status) deletedStatus() Status {
	if st.ExitedAt.IsZero() {
		st.ExitedAt = time.Now()
	}
	return st
}

// start creates the process in the task's compute system and starts relaying its stdio. The
// caller publishes the start event and then calls watch.
func (p *Process) start(ctx context.Context) (uint32, error) {
	p.mu.Lock()
	err := p.transition(procState.start)
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}

	hp, relay, err := p.launch(ctx) // starting: nobody else touches the HCS process meanwhile

	p.mu.Lock()
	if err != nil {
		if serr := p.transition(procState.startFailed); serr != nil {
			p.logger(ctx).WithError(serr).Debug("start failed after the process left starting")
		}
		p.mu.Unlock()
		return 0, err
	}
	err = p.transition(procState.started)
	if err == nil {
		p.hp, p.relay, p.pid = hp, relay, hp.Pid()
	}
	pid := p.pid
	p.mu.Unlock()
	if err != nil {
		// Killed while starting (it was created then, and its exit recorded): it must not run.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.task.deps.callTimeout())
		_, _ = hp.Kill(kctx)
		cancel()
		relay.Abort()
		relay.Close()
		_ = hp.Close()
		return 0, fmt.Errorf("start %s: %w", p.ID(), err)
	}
	return pid, nil
}

func (p *Process) launch(ctx context.Context) (HCSProcess, *stdio.Relay, error) {
	t := p.task
	params, err := oci.ProcessParameters(p.spec, oci.Stdio{Stdin: p.io.Stdin != "", Stdout: p.io.Stdout != "", Stderr: p.io.Stderr != ""})
	if err != nil {
		return nil, nil, err
	}
	// Opening an output FIFO waits for containerd's client to open its reader, bounded by
	// this request (as runc's shim does); stdin keeps opening in the background on its own.
	up, err := stdio.Open(ctx, t.deps.Namespace, p.ID(), p.io)
	if err != nil {
		return nil, nil, fmt.Errorf("stdio of %s: %w", p.ID(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.deps.createTimeout())
	defer cancel()
	sys := t.sys
	if p.execID != "" && t.sboxCtr != nil {
		// An exec in a Hyper-V pod's sandbox runs in the sandbox's container (sandboxexec.go).
		if sys, err = t.sandboxSystem(cctx); err != nil {
			_ = up.Close()
			return nil, nil, fmt.Errorf("create process %s in task %s: %w", p.ID(), t.id, err)
		}
	}
	hp, err := sys.CreateProcess(cctx, params)
	if err != nil {
		_ = up.Close()
		return nil, nil, fmt.Errorf("create process %s in compute system %q: %w", p.ID(), sys.ID(), err)
	}
	in, out, errw := hp.Stdio()
	sctx := t.deps.Ctx
	relay := stdio.NewRelay(log.WithLogger(sctx, p.logger(sctx)), up, stdio.Process{Stdin: in, Stdout: out, Stderr: errw})
	return hp, relay, nil
}

// watch waits for the started process to exit, then records its exit once its output was
// drained. beforeExit runs after the exit and before it is published (the init process uses
// it to end the execs and the compute system first).
func (p *Process) watch(ctx context.Context, beforeExit func(context.Context)) {
	p.mu.Lock()
	hp, relay := p.hp, p.relay
	p.mu.Unlock()
	select {
	case <-hp.Exited():
	case <-p.task.sys.Exited():
		// The compute system stopped (or the HCS service went away): its processes are gone
		// too. HCS may report the system's exit before its init process's, so give the
		// process's own notification a moment to arrive with its exit code.
		select {
		case <-hp.Exited():
		case <-time.After(p.task.exitGrace()):
		}
	}
	exitedAt := time.Now()
	code := exitCodeUnknown
	if c, err := hp.ExitCode(); err != nil {
		p.logger(ctx).WithError(err).Warn("exit code unknown")
	} else {
		code = c
	}
	if beforeExit != nil {
		beforeExit(ctx)
	}
	select {
	case <-relay.Drained():
	case <-time.After(drainTimeout):
		p.logger(ctx).Warn("output not drained after exit; closing it")
		relay.Abort()
		select {
		case <-relay.Drained():
		case <-time.After(drainTimeout):
			p.logger(ctx).Error("output relay stuck after exit")
		}
	}
	relay.Close()
	p.recordExit(ctx, uint32(code), exitedAt)
	_ = hp.Close()
}

// recordExit moves the process to stopped and publishes its TaskExit, exactly once.
func (p *Process) recordExit(ctx context.Context, code uint32, at time.Time) {
	p.exitOnce.Do(func() {
		p.mu.Lock()
		if err := p.transition(procState.exited); err != nil {
			p.logger(ctx).WithError(err).Error("record exit")
		}
		p.exitStatus, p.exitedAt = code, at
		pid := p.pid
		p.mu.Unlock()
		p.logger(ctx).WithFields(log.Fields{"pid": pid, "exitStatus": code}).Info("process exited")
		p.task.deps.Events.Send(runtime.TaskExitEventTopic, &eventstypes.TaskExit{
			ContainerID: p.task.id,
			ID:          p.ID(),
			Pid:         pid,
			ExitStatus:  code,
			ExitedAt:    timestamppb.New(at),
		})
		close(p.done)
	})
}

// kill delivers sig. A process that was never started ends at once.
func (p *Process) kill(ctx context.Context, sig uint32) error {
	act, err := signalAction(sig)
	if err != nil {
		return err
	}
	p.mu.Lock()
	neverRan, err := p.state.kill()
	hp, pid := p.hp, p.pid
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s: %w", p.ID(), err)
	}
	if neverRan {
		p.recordExit(ctx, exitCodeKilledCreated, time.Now())
		if p.execID == "" {
			p.task.afterInitExit(ctx)
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.task.deps.callTimeout())
	defer cancel()
	if act.terminate {
		_, err = hp.Kill(cctx)
	} else {
		var delivered bool
		delivered, err = hp.Signal(cctx, &schema2.SignalProcessOptions{Signal: act.event})
		if err == nil && !delivered {
			p.logger(ctx).WithField("signal", act.event).Debug("signal not delivered: process already exiting")
		}
	}
	if err != nil {
		if hcs.IsGone(err) {
			return fmt.Errorf("kill %s (pid %d): process already finished: %w", p.ID(), pid, errdefs.ErrNotFound)
		}
		return fmt.Errorf("kill %s (pid %d) with signal %d: %w", p.ID(), pid, sig, err)
	}
	return nil
}

// Resize sets the size of the process's console.
func (p *Process) Resize(ctx context.Context, width, height uint32) error {
	p.mu.Lock()
	use, err := p.state.console()
	hp := p.hp
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("resize console of %s: %w", p.ID(), err)
	}
	if !use {
		return nil
	}
	if !p.spec.Terminal {
		return fmt.Errorf("resize console of %s: it has no terminal: %w", p.ID(), errdefs.ErrFailedPrecondition)
	}
	if width > 0xFFFF || height > 0xFFFF {
		return fmt.Errorf("resize console of %s: %dx%d is too large: %w", p.ID(), width, height, errdefs.ErrInvalidArgument)
	}
	cctx, cancel := context.WithTimeout(ctx, p.task.deps.callTimeout())
	defer cancel()
	if err := hp.ResizeConsole(cctx, uint16(width), uint16(height)); err != nil {
		return fmt.Errorf("resize console of %s to %dx%d: %w", p.ID(), width, height, err)
	}
	return nil
}

// CloseStdin closes the process's stdin once what the client wrote has been delivered.
func (p *Process) CloseStdin() error {
	p.mu.Lock()
	use, err := p.state.closeStdin()
	relay := p.relay
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if use {
		go relay.CloseIO(time.Second)
	}
	return nil
}

// Wait blocks until the process exited (and its TaskExit was published) or ctx ends.
func (p *Process) Wait(ctx context.Context) (Status, error) {
	select {
	case <-p.done:
		return p.Status(), nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// exited reports whether the process's exit was recorded.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
