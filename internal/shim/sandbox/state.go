package sandbox

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// The values of SandboxStatusResponse.state that containerd's CRI parses
// (runtime.PodSandboxState_value in internal/cri/server/sandbox_status.go toCRISandboxStatus;
// hcsshim's containerd-shim-lcow-v2 answers the same two).
const (
	StateReady    = "SANDBOX_READY"
	StateNotReady = "SANDBOX_NOTREADY"
)

// sbState is one state of a sandbox's lifecycle: each state answers every operation and every
// question the sandbox asks, returning the next state or an error naming the illegal
// transition. No code outside this file looks at which state a sandbox is in. States hold no
// data; the sandbox does, and commits every transition under its lock.
type sbState interface {
	String() string
	// Status is the CRI state reported by SandboxStatus.
	Status() string

	// start begins starting a created sandbox; started commits a successful start and
	// startFailed a failed one.
	start() (sbState, error)
	started() (sbState, error)
	startFailed() (sbState, error)
	// stop begins stopping. run says whether the pod must be stopped now (false: it never ran,
	// or it is already stopping or stopped, and the caller only waits for the exit).
	stop() (next sbState, run bool, err error)
	// stopFailed commits a failed Stop of the pod: the sandbox is still ready.
	stopFailed() (sbState, error)
	// exited records the end of the pod, by Stop or by itself.
	exited() (sbState, error)
	// shutdown ends the sandbox for good; it is allowed once the sandbox is stopped.
	shutdown() (sbState, error)

	// mustStop says whether Shutdown has to stop the sandbox first.
	mustStop() bool
	// ended says whether the pod has ended (Wait returns).
	ended() bool
	// canJoin says whether a container may join the sandbox now.
	canJoin() error
	// canMeasure says whether the pod's statistics can be read now (Metrics).
	canMeasure() error
	// ping answers PingSandbox.
	ping() error
}

func illegal(op string, s sbState) error {
	return fmt.Errorf("cannot %s a %s sandbox: %w", op, s, errdefs.ErrFailedPrecondition)
}

func notReady(what string, s sbState) error {
	return fmt.Errorf("%s: the sandbox is %s, not ready: %w", what, s, errdefs.ErrFailedPrecondition)
}

var errShutdown = fmt.Errorf("sandbox shut down: %w", errdefs.ErrNotFound)

type (
	createdState  struct{}
	startingState struct{}
	readyState    struct{}
	stoppingState struct{}
	stoppedState  struct{}
	shutdownState struct{}
)

var (
	_ sbState = createdState{}
	_ sbState = startingState{}
	_ sbState = readyState{}
	_ sbState = stoppingState{}
	_ sbState = stoppedState{}
	_ sbState = shutdownState{}
)

// created: made by CreateSandbox, its state recorded in the bundle; its pod not started.

func (createdState) String() string                  { return "created" }
func (createdState) Status() string                  { return StateNotReady }
func (createdState) start() (sbState, error)         { return startingState{}, nil }
func (s createdState) started() (sbState, error)     { return nil, illegal("commit the start of", s) }
func (s createdState) startFailed() (sbState, error) { return nil, illegal("fail the start of", s) }
func (createdState) stop() (sbState, bool, error)    { return stoppedState{}, false, nil }
func (s createdState) stopFailed() (sbState, error)  { return nil, illegal("fail the stop of", s) }
func (s createdState) exited() (sbState, error)      { return nil, illegal("record the exit of", s) }
func (s createdState) shutdown() (sbState, error)    { return nil, illegal("shut down", s) }
func (createdState) mustStop() bool                  { return true }
func (createdState) ended() bool                     { return false }
func (s createdState) canJoin() error                { return notReady("join", s) }
func (s createdState) canMeasure() error             { return notReady("metrics", s) }
func (s createdState) ping() error                   { return notReady("ping", s) }

// starting: its pod is being started; no other call is made on the pod meanwhile.

func (startingState) String() string                { return "starting" }
func (startingState) Status() string                { return StateNotReady }
func (s startingState) start() (sbState, error)     { return nil, illegal("start", s) }
func (startingState) started() (sbState, error)     { return readyState{}, nil }
func (startingState) startFailed() (sbState, error) { return createdState{}, nil }
func (s startingState) stop() (sbState, bool, error) {
	return nil, false, fmt.Errorf("cannot stop a sandbox that is being started; retry: %w", errdefs.ErrUnavailable)
}
func (s startingState) stopFailed() (sbState, error) { return nil, illegal("fail the stop of", s) }

// A pod may end while it is being started (a VM that crashes at boot); its start then fails.
func (startingState) exited() (sbState, error)     { return stoppedState{}, nil }
func (s startingState) shutdown() (sbState, error) { return nil, illegal("shut down", s) }
func (startingState) mustStop() bool               { return true }
func (startingState) ended() bool                  { return false }
func (s startingState) canJoin() error             { return notReady("join", s) }
func (s startingState) canMeasure() error          { return notReady("metrics", s) }
func (s startingState) ping() error                { return notReady("ping", s) }

// ready: its pod runs; containers join it.

func (readyState) String() string                  { return "ready" }
func (readyState) Status() string                  { return StateReady }
func (s readyState) start() (sbState, error)       { return nil, illegal("start", s) }
func (s readyState) started() (sbState, error)     { return nil, illegal("commit the start of", s) }
func (s readyState) startFailed() (sbState, error) { return nil, illegal("fail the start of", s) }
func (readyState) stop() (sbState, bool, error)    { return stoppingState{}, true, nil }
func (s readyState) stopFailed() (sbState, error)  { return nil, illegal("fail the stop of", s) }
func (readyState) exited() (sbState, error)        { return stoppedState{}, nil }
func (s readyState) shutdown() (sbState, error)    { return nil, illegal("shut down", s) }
func (readyState) mustStop() bool                  { return true }
func (readyState) ended() bool                     { return false }
func (readyState) canJoin() error                  { return nil }
func (readyState) canMeasure() error               { return nil }
func (readyState) ping() error                     { return nil }

// stopping: its pod is being stopped. A second Stop waits for the same exit.

func (stoppingState) String() string                  { return "stopping" }
func (stoppingState) Status() string                  { return StateNotReady }
func (s stoppingState) start() (sbState, error)       { return nil, illegal("start", s) }
func (s stoppingState) started() (sbState, error)     { return nil, illegal("commit the start of", s) }
func (s stoppingState) startFailed() (sbState, error) { return nil, illegal("fail the start of", s) }
func (stoppingState) stop() (sbState, bool, error)    { return stoppingState{}, false, nil }
func (stoppingState) stopFailed() (sbState, error)    { return readyState{}, nil }
func (stoppingState) exited() (sbState, error)        { return stoppedState{}, nil }
func (s stoppingState) shutdown() (sbState, error)    { return nil, illegal("shut down", s) }
func (stoppingState) mustStop() bool                  { return true }
func (stoppingState) ended() bool                     { return false }
func (s stoppingState) canJoin() error                { return notReady("join", s) }
func (s stoppingState) canMeasure() error             { return notReady("metrics", s) }
func (s stoppingState) ping() error                   { return notReady("ping", s) }

// stopped: its pod ended (WaitSandbox has returned); only ShutdownSandbox is left.

func (stoppedState) String() string                  { return "stopped" }
func (stoppedState) Status() string                  { return StateNotReady }
func (s stoppedState) start() (sbState, error)       { return nil, illegal("start", s) }
func (s stoppedState) started() (sbState, error)     { return nil, illegal("commit the start of", s) }
func (s stoppedState) startFailed() (sbState, error) { return nil, illegal("fail the start of", s) }

// StopPodSandbox is repeated by kubelet until it succeeds: a stopped sandbox stops again.
func (stoppedState) stop() (sbState, bool, error)   { return stoppedState{}, false, nil }
func (s stoppedState) stopFailed() (sbState, error) { return nil, illegal("fail the stop of", s) }
func (s stoppedState) exited() (sbState, error)     { return nil, illegal("record the exit of", s) }
func (stoppedState) shutdown() (sbState, error)     { return shutdownState{}, nil }
func (stoppedState) mustStop() bool                 { return false }
func (stoppedState) ended() bool                    { return true }
func (s stoppedState) canJoin() error               { return notReady("join", s) }
func (s stoppedState) canMeasure() error            { return notReady("metrics", s) }
func (s stoppedState) ping() error                  { return notReady("ping", s) }

// shut down: released and its state removed; only its final status is left.

func (shutdownState) String() string                  { return "shut down" }
func (shutdownState) Status() string                  { return StateNotReady }
func (shutdownState) start() (sbState, error)         { return nil, errShutdown }
func (s shutdownState) started() (sbState, error)     { return nil, illegal("commit the start of", s) }
func (s shutdownState) startFailed() (sbState, error) { return nil, illegal("fail the start of", s) }
func (shutdownState) stop() (sbState, bool, error)    { return nil, false, errShutdown }
func (s shutdownState) stopFailed() (sbState, error)  { return nil, illegal("fail the stop of", s) }
func (s shutdownState) exited() (sbState, error)      { return nil, illegal("record the exit of", s) }
func (shutdownState) shutdown() (sbState, error)      { return nil, errShutdown }
func (shutdownState) mustStop() bool                  { return false }
func (shutdownState) ended() bool                     { return true }
func (shutdownState) canJoin() error                  { return errShutdown }
func (shutdownState) canMeasure() error               { return errShutdown }
func (shutdownState) ping() error                     { return errShutdown }
