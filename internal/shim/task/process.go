package task

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

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

// Process is a process in a compute system: the init process of a container (exec id "") or
// one of a task's execs. Its lifecycle (state, exit, TaskExit) is its life, whose mu also
// guards hp and relay; only this file and life.go take it.
type Process struct {
	life
	host   processHost
	execID string
	spec   *specs.Process
	io     stdio.Config

	hp    HCSProcess
	relay *stdio.Relay
}

// processHost is what a process needs of the task it belongs to, whatever its kind: the
// compute system to create it in and whose exit ends it, and, for an init process, what
// happens when it exits.
type processHost interface {
	taskID() string
	taskDeps() Deps
	// processSystem is the compute system the process execID is created in.
	processSystem(ctx context.Context, execID string) (System, error)
	// systemExited is closed when the system the process runs in stopped.
	systemExited() <-chan struct{}
	// afterInitExit runs when the task's init process exited, before its exit is published.
	afterInitExit(ctx context.Context)
}

func newProcess(h processHost, execID string, spec *specs.Process, io stdio.Config) *Process {
	p := &Process{host: h, execID: execID, spec: spec, io: io}
	p.life.init(h.taskDeps().Events, h.taskID(), p.ID())
	return p
}

// ID is the process's id in events: the exec id, or the container id for the init process.
func (p *Process) ID() string {
	if p.execID == "" {
		return p.host.taskID()
	}
	return p.execID
}

// ExecID is the exec id, "" for the init process.
func (p *Process) ExecID() string { return p.execID }

// IO is the stdio the client set up for the process.
func (p *Process) IO() stdio.Config { return p.io }

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
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.host.taskDeps().callTimeout())
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
	deps := p.host.taskDeps()
	params, err := oci.ProcessParameters(p.spec, oci.Stdio{Stdin: p.io.Stdin != "", Stdout: p.io.Stdout != "", Stderr: p.io.Stderr != ""})
	if err != nil {
		return nil, nil, err
	}
	// Opening an output FIFO waits for containerd's client to open its reader, bounded by
	// this request (as runc's shim does); stdin keeps opening in the background on its own.
	up, err := stdio.Open(ctx, deps.Namespace, p.ID(), p.io)
	if err != nil {
		return nil, nil, fmt.Errorf("stdio of %s: %w", p.ID(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, deps.createTimeout())
	defer cancel()
	sys, err := p.host.processSystem(cctx, p.execID)
	if err != nil {
		_ = up.Close()
		return nil, nil, fmt.Errorf("create process %s in task %s: %w", p.ID(), p.host.taskID(), err)
	}
	hp, err := sys.CreateProcess(cctx, params)
	if err != nil {
		_ = up.Close()
		return nil, nil, fmt.Errorf("create process %s in compute system %q: %w", p.ID(), sys.ID(), err)
	}
	in, out, errw := hp.Stdio()
	sctx := deps.Ctx
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
	case <-p.host.systemExited():
		// The compute system stopped (or the HCS service went away): its processes are gone
		// too. HCS may report the system's exit before its init process's, so give the
		// process's own notification a moment to arrive with its exit code.
		select {
		case <-hp.Exited():
		case <-time.After(cmp.Or(p.host.taskDeps().ExitGrace, DefaultExitGrace)):
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
			p.host.afterInitExit(ctx)
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.host.taskDeps().callTimeout())
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
	cctx, cancel := context.WithTimeout(ctx, p.host.taskDeps().callTimeout())
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
