package shim

import (
	"fmt"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
)

// procState is one state of a process's lifecycle (after runc's init_state.go): each state
// answers every operation, returning the next state or an error naming the illegal
// transition. States hold no data; the process does. Transitions happen under the process's
// lock and never around an HCS call: a call is made between a transition into an
// intermediate state (starting) or after checking (kill, pause), then the result committed.
type procState interface {
	Status() tasktypes.Status
	// start begins starting a created process.
	start() (procState, error)
	// started commits a successful start; startFailed a failed one.
	started() (procState, error)
	startFailed() (procState, error)
	// kill checks that the process can be signalled.
	kill() error
	pause() (procState, error)
	resume() (procState, error)
	// exited records the process's exit.
	exited() (procState, error)
	delete() (procState, error)
	// io checks that the process's stdio can be used (ResizePty, CloseIO).
	io() error
	String() string
}

func illegal(op string, s procState) error {
	return fmt.Errorf("cannot %s a %s process: %w", op, s, errdefs.ErrFailedPrecondition)
}

type (
	createdState  struct{}
	startingState struct{}
	runningState  struct{}
	pausedState   struct{}
	stoppedState  struct{}
	deletedState  struct{}
)

var (
	_ procState = createdState{}
	_ procState = startingState{}
	_ procState = runningState{}
	_ procState = pausedState{}
	_ procState = stoppedState{}
	_ procState = deletedState{}
)

func (createdState) String() string                { return "created" }
func (createdState) Status() tasktypes.Status      { return tasktypes.Status_CREATED }
func (createdState) start() (procState, error)     { return startingState{}, nil }
func (s createdState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s createdState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// kill of a created process ends it without it ever running (hcsshim does the same).
func (createdState) kill() error                  { return nil }
func (s createdState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s createdState) resume() (procState, error) { return nil, illegal("resume", s) }
func (createdState) exited() (procState, error)   { return stoppedState{}, nil }
func (createdState) delete() (procState, error)   { return deletedState{}, nil }
func (s createdState) io() error                  { return illegal("use the stdio of", s) }
func (startingState) String() string              { return "starting" }
func (startingState) Status() tasktypes.Status    { return tasktypes.Status_CREATED }
func (s startingState) start() (procState, error) { return nil, illegal("start", s) }
func (startingState) started() (procState, error) { return runningState{}, nil }
func (startingState) startFailed() (procState, error) {
	return createdState{}, nil
}
func (s startingState) kill() error {
	return fmt.Errorf("cannot kill a process that is being started; retry: %w", errdefs.ErrUnavailable)
}
func (s startingState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s startingState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s startingState) exited() (procState, error) { return stoppedState{}, nil }
func (s startingState) delete() (procState, error) { return nil, illegal("delete", s) }
func (s startingState) io() error                  { return illegal("use the stdio of", s) }
func (runningState) String() string                { return "running" }
func (runningState) Status() tasktypes.Status      { return tasktypes.Status_RUNNING }
func (s runningState) start() (procState, error)   { return nil, illegal("start", s) }
func (s runningState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s runningState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}
func (runningState) kill() error                  { return nil }
func (runningState) pause() (procState, error)    { return pausedState{}, nil }
func (s runningState) resume() (procState, error) { return nil, illegal("resume", s) }
func (runningState) exited() (procState, error)   { return stoppedState{}, nil }
func (s runningState) delete() (procState, error) {
	return nil, fmt.Errorf("cannot delete a running process; kill it first: %w", errdefs.ErrFailedPrecondition)
}
func (runningState) io() error                    { return nil }
func (pausedState) String() string                { return "paused" }
func (pausedState) Status() tasktypes.Status      { return tasktypes.Status_PAUSED }
func (s pausedState) start() (procState, error)   { return nil, illegal("start", s) }
func (s pausedState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s pausedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// A paused silo can still be terminated (HCS allows Terminate from Paused).
func (pausedState) kill() error                 { return nil }
func (s pausedState) pause() (procState, error) { return nil, illegal("pause", s) }
func (pausedState) resume() (procState, error)  { return runningState{}, nil }
func (pausedState) exited() (procState, error)  { return stoppedState{}, nil }
func (s pausedState) delete() (procState, error) {
	return nil, fmt.Errorf("cannot delete a paused process; resume or kill it first: %w", errdefs.ErrFailedPrecondition)
}
func (pausedState) io() error                      { return nil }
func (stoppedState) String() string                { return "stopped" }
func (stoppedState) Status() tasktypes.Status      { return tasktypes.Status_STOPPED }
func (s stoppedState) start() (procState, error)   { return nil, illegal("start", s) }
func (s stoppedState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s stoppedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// Signalling a finished process is NotFound, as in runc's shim ("process already finished").
func (stoppedState) kill() error {
	return fmt.Errorf("process already finished: %w", errdefs.ErrNotFound)
}
func (s stoppedState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s stoppedState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s stoppedState) exited() (procState, error) { return nil, illegal("record the exit of", s) }
func (stoppedState) delete() (procState, error)   { return deletedState{}, nil }
func (s stoppedState) io() error                  { return illegal("use the stdio of", s) }
func (deletedState) String() string               { return "deleted" }
func (deletedState) Status() tasktypes.Status     { return tasktypes.Status_STOPPED }
func (deletedState) start() (procState, error) {
	return nil, fmt.Errorf("process deleted: %w", errdefs.ErrNotFound)
}
func (s deletedState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s deletedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}
func (deletedState) kill() error                  { return fmt.Errorf("process deleted: %w", errdefs.ErrNotFound) }
func (s deletedState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s deletedState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s deletedState) exited() (procState, error) { return nil, illegal("record the exit of", s) }
func (deletedState) delete() (procState, error) {
	return nil, fmt.Errorf("process already deleted: %w", errdefs.ErrNotFound)
}
func (deletedState) io() error { return fmt.Errorf("process deleted: %w", errdefs.ErrNotFound) }
