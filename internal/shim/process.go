package shim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
)

// exitCodeUnknown is reported when HCS cannot tell a process's exit code (the service went
// away, or the process never ran); containerd uses 255 for the same purpose.
const exitCodeUnknown = 255

// processExitGrace is how long a process's exit notification may trail its system's (a
// variable for tests).
var processExitGrace = 5 * time.Second

// exitCodeKilledCreated is the exit code of a process killed before it was started (hcsshim
// reports 1 for it, as Windows does for a terminated process).
const exitCodeKilledCreated = 1

// process is a task's init process (execID "") or one of its execs.
type process struct {
	task   *task
	execID string
	spec   *specs.Process
	io     stdio.Config

	mu         sync.Mutex
	state      procState
	pid        uint32
	hp         hcsProcess
	relay      *stdio.Relay
	exitStatus uint32
	exitedAt   time.Time

	exitOnce sync.Once
	done     chan struct{} // closed once the exit was recorded and its TaskExit published
}

func newProcess(t *task, execID string, spec *specs.Process, io stdio.Config) *process {
	return &process{task: t, execID: execID, spec: spec, io: io, state: createdState{}, done: make(chan struct{})}
}

// id is the process's id in events: the exec id, or the container id for the init process.
func (p *process) id() string {
	if p.execID == "" {
		return p.task.id
	}
	return p.execID
}

func (p *process) logger(ctx context.Context) *log.Entry {
	e := log.G(ctx).WithField("task", p.task.id)
	if p.execID != "" {
		e = e.WithField("exec", p.execID)
	}
	return e
}

type processStatus struct {
	state      procState
	pid        uint32
	exitStatus uint32
	exitedAt   time.Time
}

func (p *process) status() processStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return processStatus{state: p.state, pid: p.pid, exitStatus: p.exitStatus, exitedAt: p.exitedAt}
}

// start creates the process in the task's compute system and starts relaying its stdio.
// The caller publishes the start event and then calls watch.
func (p *process) start(ctx context.Context) (uint32, error) {
	p.mu.Lock()
	next, err := p.state.start()
	if err != nil {
		p.mu.Unlock()
		return 0, err
	}
	p.state = next
	p.mu.Unlock()

	hp, relay, err := p.launch(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if next, serr := p.state.startFailed(); serr == nil {
			p.state = next
		}
		return 0, err
	}
	next, err = p.state.started()
	if err != nil {
		// Killed while starting (it was created then): it must not run.
		p.mu.Unlock()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hcsCallTimeout)
		_, _ = hp.Kill(kctx)
		cancel()
		relay.Abort()
		relay.Close()
		_ = hp.Close()
		p.mu.Lock()
		return 0, fmt.Errorf("start %s: %w", p.id(), err)
	}
	p.state, p.hp, p.relay, p.pid = next, hp, relay, hp.Pid()
	return p.pid, nil
}

func (p *process) launch(ctx context.Context) (hcsProcess, *stdio.Relay, error) {
	t := p.task
	params, err := oci.ProcessParameters(p.spec, oci.Stdio{Stdin: p.io.Stdin != "", Stdout: p.io.Stdout != "", Stderr: p.io.Stderr != ""})
	if err != nil {
		return nil, nil, err
	}
	// Opening an output FIFO waits for containerd's client to open its reader, bounded by
	// this request (as runc's shim does); stdin keeps opening in the background on its own.
	up, err := stdio.Open(ctx, t.svc.namespace, p.id(), p.io)
	if err != nil {
		return nil, nil, fmt.Errorf("stdio of %s: %w", p.id(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	hp, err := t.sys.CreateProcess(cctx, params)
	if err != nil {
		_ = up.Close()
		return nil, nil, fmt.Errorf("create process %s in compute system %q: %w", p.id(), t.sys.ID(), err)
	}
	in, out, errw := hp.Stdio()
	relay := stdio.NewRelay(log.WithLogger(t.svc.ctx, p.logger(t.svc.ctx)), up, stdio.Process{Stdin: in, Stdout: out, Stderr: errw})
	return hp, relay, nil
}

// watch waits for the started process to exit, then records its exit once its output was
// drained. beforeExit runs after the exit and before it is published (the init process uses
// it to end the execs and the compute system first).
func (p *process) watch(ctx context.Context, beforeExit func(context.Context)) {
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
		case <-time.After(processExitGrace):
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
func (p *process) recordExit(ctx context.Context, code uint32, at time.Time) {
	p.exitOnce.Do(func() {
		p.mu.Lock()
		next, err := p.state.exited()
		if err != nil {
			p.logger(ctx).WithError(err).Error("record exit")
		} else {
			p.state = next
		}
		p.exitStatus, p.exitedAt = code, at
		pid := p.pid
		p.mu.Unlock()
		p.logger(ctx).WithFields(log.Fields{"pid": pid, "exitStatus": code}).Info("process exited")
		p.task.svc.events.send(runtime.TaskExitEventTopic, &eventstypes.TaskExit{
			ContainerID: p.task.id,
			ID:          p.id(),
			Pid:         pid,
			ExitStatus:  code,
			ExitedAt:    timestamppb.New(at),
		})
		close(p.done)
	})
}

// kill delivers sig. A process that was never started ends at once.
func (p *process) kill(ctx context.Context, sig uint32) error {
	act, err := signalAction(sig)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if err := p.state.kill(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("kill %s: %w", p.id(), err)
	}
	_, created := p.state.(createdState)
	hp, pid := p.hp, p.pid
	p.mu.Unlock()
	if created {
		p.recordExit(ctx, exitCodeKilledCreated, time.Now())
		if p.execID == "" {
			p.task.afterInitExit(ctx)
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
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
		if p.task.svc.host.IsGone(err) {
			return fmt.Errorf("kill %s (pid %d): process already finished: %w", p.id(), pid, errdefs.ErrNotFound)
		}
		return fmt.Errorf("kill %s (pid %d) with signal %d: %w", p.id(), pid, sig, err)
	}
	return nil
}

func (p *process) resize(ctx context.Context, width, height uint32) error {
	p.mu.Lock()
	st := p.state
	err := st.io()
	hp := p.hp
	p.mu.Unlock()
	if _, stopped := st.(stoppedState); stopped {
		// A client resizes right after start and on every window change; a process that
		// already exited has no console left to size (runc's shim ignores it too).
		return nil
	}
	if err != nil {
		return fmt.Errorf("resize console of %s: %w", p.id(), err)
	}
	if !p.spec.Terminal {
		return fmt.Errorf("resize console of %s: it has no terminal: %w", p.id(), errdefs.ErrFailedPrecondition)
	}
	if width > 0xFFFF || height > 0xFFFF {
		return fmt.Errorf("resize console of %s: %dx%d is too large: %w", p.id(), width, height, errdefs.ErrInvalidArgument)
	}
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	if err := hp.ResizeConsole(cctx, uint16(width), uint16(height)); err != nil {
		return fmt.Errorf("resize console of %s to %dx%d: %w", p.id(), width, height, err)
	}
	return nil
}

// closeIO closes the process's stdin once what the client wrote has been delivered.
func (p *process) closeIO(ctx context.Context) error {
	p.mu.Lock()
	err := p.state.io()
	relay := p.relay
	p.mu.Unlock()
	if err != nil {
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			// Nothing to close any more (stopped) or yet (created): not an error for the client.
			return nil
		}
		return err
	}
	go relay.CloseIO(time.Second)
	return nil
}

// wait blocks until the process exited (and its TaskExit was published) or ctx ends.
func (p *process) wait(ctx context.Context) (processStatus, error) {
	select {
	case <-p.done:
		return p.status(), nil
	case <-ctx.Done():
		return processStatus{}, ctx.Err()
	}
}

// exited reports whether the process's exit was recorded.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
