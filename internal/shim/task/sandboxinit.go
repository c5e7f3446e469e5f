package task

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/shim/stdio"
)

// sandboxLife is what a sandbox task that is no process tells its init (sandboxInit).
type sandboxLife struct {
	// what names the sandbox in errors ("the sandbox of a Hyper-V pod").
	what string
	// ended is closed when the sandbox's life is over: its VM stopped, or it was stopped.
	ended <-chan struct{}
	// stop ends the sandbox's life on a kill of any signal (there is no process to deliver
	// it to); ended is closed once it did.
	stop func(context.Context) error
	// after runs when the init ends without having started (killed while created), as the
	// task's afterInitExit runs after a started one's exit.
	after func(context.Context)
}

// sandboxInit is the init of a sandbox task that is no process: a Hyper-V pod's sandbox (its
// utility VM's life) or a HostProcess pod's (which holds nothing). hcsshim models both so
// (cmd/containerd-shim-runhcs-v1/exec_wcow_podsandbox.go, wcowPodSandboxExec). Start commits
// running with pid 0; the exit comes when the life ends: 0 when the sandbox was killed, 1 when
// it ended by itself (a VM that stopped; hcsshim force-exits the sandbox init with 1 when its
// host exits) or was killed before it started. Its stdio, if containerd gave any, is opened at
// the start and closed at the exit, carrying nothing.
type sandboxInit struct {
	life
	sandboxLife
	deps Deps
	io   stdio.Config

	relay  *stdio.Relay // guarded by mu
	killed bool         // guarded by mu
}

var _ proc = (*sandboxInit)(nil)

func newSandboxInit(deps Deps, id string, io stdio.Config, sl sandboxLife) *sandboxInit {
	p := &sandboxInit{sandboxLife: sl, deps: deps, io: io}
	p.life.init(deps.Events, id, id)
	return p
}

func (p *sandboxInit) ID() string       { return p.taskID }
func (p *sandboxInit) IO() stdio.Config { return p.io }

func (p *sandboxInit) start(ctx context.Context) (uint32, error) {
	p.mu.Lock()
	err := p.transition(procState.start)
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	up, err := stdio.Open(ctx, p.deps.Namespace, p.ID(), p.io)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if serr := p.transition(procState.startFailed); serr != nil {
			p.logger(ctx).WithError(serr).Debug("start failed after the sandbox left starting")
		}
		return 0, fmt.Errorf("stdio of %s: %w", p.ID(), err)
	}
	sctx := p.deps.Ctx
	relay := stdio.NewRelay(log.WithLogger(sctx, p.logger(sctx)), up, stdio.Process{})
	if err := p.transition(procState.started); err != nil {
		// Killed while starting: it must not run.
		relay.Abort()
		relay.Close()
		return 0, fmt.Errorf("start %s: %w", p.ID(), err)
	}
	p.relay = relay
	return 0, nil
}

func (p *sandboxInit) watch(ctx context.Context, beforeExit func(context.Context)) {
	<-p.ended
	exitedAt := time.Now()
	p.mu.Lock()
	code, relay := uint32(exitCodeKilledCreated), p.relay
	if p.killed {
		code = 0
	}
	p.mu.Unlock()
	if beforeExit != nil {
		beforeExit(ctx)
	}
	if relay != nil {
		relay.Abort()
		relay.Close()
	}
	p.recordExit(ctx, code, exitedAt)
}

func (p *sandboxInit) kill(ctx context.Context, sig uint32) error {
	if _, err := signalAction(sig); err != nil {
		return err
	}
	p.mu.Lock()
	neverRan, err := p.state.kill()
	if err == nil && !neverRan {
		p.killed = true
	}
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("kill %s: %w", p.ID(), err)
	}
	if neverRan {
		p.recordExit(ctx, exitCodeKilledCreated, time.Now())
		if p.after != nil {
			p.after(ctx)
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.deps.callTimeout())
	defer cancel()
	return p.stop(cctx)
}

// Resize: the sandbox has no console.
func (p *sandboxInit) Resize(ctx context.Context, width, height uint32) error {
	p.mu.Lock()
	use, err := p.state.console()
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("resize console of %s: %w", p.ID(), err)
	}
	if !use {
		return nil
	}
	return fmt.Errorf("resize console of %s: %s has no console: %w", p.ID(), p.what, errdefs.ErrFailedPrecondition)
}

// CloseStdin: the sandbox reads no input; there is nothing to close.
func (p *sandboxInit) CloseStdin() error {
	p.mu.Lock()
	_, err := p.state.closeStdin()
	p.mu.Unlock()
	return err
}
