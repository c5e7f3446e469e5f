package task

import (
	"fmt"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
)

// procState is one state of a process's lifecycle (after runc's process/init_state.go): each
// state answers every operation and every question its callers ask, returning the next state
// or an error naming the illegal transition. No code outside this file looks at which state a
// process is in. States hold no data; the process does. Transitions are committed by the
// process, under its lock, through process.transition, never around an HCS call: a call is
// made after a transition into an intermediate state (starting) or after checking (kill,
// pause), and its result committed afterwards.
type procState interface {
	String() string
	Status() tasktypes.Status

	// start begins starting a created process; started commits a successful start and
	// startFailed a failed one.
	start() (procState, error)
	started() (procState, error)
	startFailed() (procState, error)
	// kill checks that the process can be signalled. neverRan says it was never started, so
	// the kill ends it at once, without HCS.
	kill() (neverRan bool, err error)
	pause() (procState, error)
	resume() (procState, error)
	// exited records the process's exit.
	exited() (procState, error)
	delete() (procState, error)

	// console says whether the process's console can be resized now. use false with no error
	// is a resize that is not an error but does nothing (the process exited).
	console() (use bool, err error)
	// closeStdin says whether the process has a stdin to close now; use false with no error is
	// nothing to close (yet, or any more), which is not an error for the client.
	closeStdin() (use bool, err error)
	// canExec says whether a task whose init process is in this state takes new execs.
	canExec() error
	// canDeleteTask says whether a task may be deleted while one of its execs is in this state.
	canDeleteTask() error
}

func illegal(op string, s procState) error {
	return fmt.Errorf("cannot %s a %s process: %w", op, s, errdefs.ErrFailedPrecondition)
}

func notExec(s procState) error {
	return fmt.Errorf("the task is %s: %w", s, errdefs.ErrFailedPrecondition)
}

func stillLive(s procState) error {
	return fmt.Errorf("it is still %s: %w", s, errdefs.ErrFailedPrecondition)
}

var errDeleted = fmt.Errorf("process deleted: %w", errdefs.ErrNotFound)

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

// created: made by Create or Exec, not started.

func (createdState) String() string                { return "created" }
func (createdState) Status() tasktypes.Status      { return tasktypes.Status_CREATED }
func (createdState) start() (procState, error)     { return startingState{}, nil }
func (s createdState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s createdState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// kill of a created process ends it without it ever running (hcsshim does the same).
func (createdState) kill() (bool, error)          { return true, nil }
func (s createdState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s createdState) resume() (procState, error) { return nil, illegal("resume", s) }
func (createdState) exited() (procState, error)   { return stoppedState{}, nil }
func (createdState) delete() (procState, error)   { return deletedState{}, nil }
func (s createdState) console() (bool, error)     { return false, illegal("use the stdio of", s) }
func (createdState) closeStdin() (bool, error)    { return false, nil }
func (s createdState) canExec() error             { return notExec(s) }
func (createdState) canDeleteTask() error         { return nil }

// starting: its HCS process is being created; no HCS call is made on it meanwhile.

func (startingState) String() string              { return "starting" }
func (startingState) Status() tasktypes.Status    { return tasktypes.Status_CREATED }
func (s startingState) start() (procState, error) { return nil, illegal("start", s) }
func (startingState) started() (procState, error) { return runningState{}, nil }
func (startingState) startFailed() (procState, error) {
	return createdState{}, nil
}
func (s startingState) kill() (bool, error) {
	return false, fmt.Errorf("cannot kill a process that is being started; retry: %w", errdefs.ErrUnavailable)
}
func (s startingState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s startingState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s startingState) exited() (procState, error) { return stoppedState{}, nil }
func (s startingState) delete() (procState, error) { return nil, illegal("delete", s) }
func (s startingState) console() (bool, error)     { return false, illegal("use the stdio of", s) }
func (startingState) closeStdin() (bool, error)    { return false, nil }
func (s startingState) canExec() error             { return notExec(s) }
func (s startingState) canDeleteTask() error       { return stillLive(s) }

// running: started in HCS.

func (runningState) String() string                { return "running" }
func (runningState) Status() tasktypes.Status      { return tasktypes.Status_RUNNING }
func (s runningState) start() (procState, error)   { return nil, illegal("start", s) }
func (s runningState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s runningState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}
func (runningState) kill() (bool, error)          { return false, nil }
func (runningState) pause() (procState, error)    { return pausedState{}, nil }
func (s runningState) resume() (procState, error) { return nil, illegal("resume", s) }
func (runningState) exited() (procState, error)   { return stoppedState{}, nil }
func (s runningState) delete() (procState, error) {
	return nil, fmt.Errorf("cannot delete a running process; kill it first: %w", errdefs.ErrFailedPrecondition)
}
func (runningState) console() (bool, error)    { return true, nil }
func (runningState) closeStdin() (bool, error) { return true, nil }
func (runningState) canExec() error            { return nil }
func (s runningState) canDeleteTask() error    { return stillLive(s) }

// paused: its compute system is paused (only an init process is ever paused).

func (pausedState) String() string                { return "paused" }
func (pausedState) Status() tasktypes.Status      { return tasktypes.Status_PAUSED }
func (s pausedState) start() (procState, error)   { return nil, illegal("start", s) }
func (s pausedState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s pausedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// A paused silo can still be terminated (HCS allows Terminate from Paused).
func (pausedState) kill() (bool, error)         { return false, nil }
func (s pausedState) pause() (procState, error) { return nil, illegal("pause", s) }
func (pausedState) resume() (procState, error)  { return runningState{}, nil }
func (pausedState) exited() (procState, error)  { return stoppedState{}, nil }
func (s pausedState) delete() (procState, error) {
	return nil, fmt.Errorf("cannot delete a paused process; resume or kill it first: %w", errdefs.ErrFailedPrecondition)
}
func (pausedState) console() (bool, error)    { return true, nil }
func (pausedState) closeStdin() (bool, error) { return true, nil }
func (s pausedState) canExec() error          { return notExec(s) }
func (s pausedState) canDeleteTask() error    { return stillLive(s) }

// stopped: its exit was recorded (and its TaskExit published).

func (stoppedState) String() string                { return "stopped" }
func (stoppedState) Status() tasktypes.Status      { return tasktypes.Status_STOPPED }
func (s stoppedState) start() (procState, error)   { return nil, illegal("start", s) }
func (s stoppedState) started() (procState, error) { return nil, illegal("commit the start of", s) }
func (s stoppedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}

// Signalling a finished process is NotFound, as in runc's shim ("process already finished").
func (stoppedState) kill() (bool, error) {
	return false, fmt.Errorf("process already finished: %w", errdefs.ErrNotFound)
}
func (s stoppedState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s stoppedState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s stoppedState) exited() (procState, error) { return nil, illegal("record the exit of", s) }
func (stoppedState) delete() (procState, error)   { return deletedState{}, nil }

// A client resizes right after start and on every window change; a process that already
// exited has no console left to size (runc's shim ignores it too).
func (stoppedState) console() (bool, error)    { return false, nil }
func (stoppedState) closeStdin() (bool, error) { return false, nil }
func (s stoppedState) canExec() error          { return notExec(s) }
func (stoppedState) canDeleteTask() error      { return nil }

// deleted: removed by Delete; only its final status is left.

func (deletedState) String() string            { return "deleted" }
func (deletedState) Status() tasktypes.Status  { return tasktypes.Status_STOPPED }
func (deletedState) start() (procState, error) { return nil, errDeleted }
func (s deletedState) started() (procState, error) {
	return nil, illegal("commit the start of", s)
}
func (s deletedState) startFailed() (procState, error) {
	return nil, illegal("fail the start of", s)
}
func (deletedState) kill() (bool, error)          { return false, errDeleted }
func (s deletedState) pause() (procState, error)  { return nil, illegal("pause", s) }
func (s deletedState) resume() (procState, error) { return nil, illegal("resume", s) }
func (s deletedState) exited() (procState, error) { return nil, illegal("record the exit of", s) }
func (deletedState) delete() (procState, error) {
	return nil, fmt.Errorf("process already deleted: %w", errdefs.ErrNotFound)
}
func (deletedState) console() (bool, error)    { return false, errDeleted }
func (deletedState) closeStdin() (bool, error) { return false, errDeleted }
func (s deletedState) canExec() error          { return notExec(s) }
func (deletedState) canDeleteTask() error      { return nil }
