package task

import (
	"context"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/log"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/shim/stdio"
)

// Proc is what the task service asks of a process of any task: a Process (in a compute
// system), or a VM sandbox's init, which is its utility VM's life.
type Proc interface {
	// ID is the process's id in events: the exec id, or the task's id for the init process.
	ID() string
	// IO is the stdio the client set up for the process.
	IO() stdio.Config
	Status() Status
	// Wait blocks until the process exited (and its TaskExit was published) or ctx ends.
	Wait(ctx context.Context) (Status, error)
	// Resize sets the size of the process's console.
	Resize(ctx context.Context, width, height uint32) error
	// CloseStdin closes the process's stdin once what the client wrote has been delivered.
	CloseStdin() error
}

// proc is what a task's shared machinery (base) needs of its processes: the exported Proc, the
// lifecycle they all share (life), and the operations whose HCS calls differ by kind.
type proc interface {
	Proc
	lifecycle() *life
	// start starts the created process and returns its pid; watch then waits for its exit
	// (beforeExit runs after the exit and before it is published).
	start(ctx context.Context) (uint32, error)
	watch(ctx context.Context, beforeExit func(context.Context))
	kill(ctx context.Context, sig uint32) error
	logger(ctx context.Context) *log.Entry
}

var _ proc = (*Process)(nil)

// life is the lifecycle every process shares, whatever runs it: its state (state.go), its pid
// and exit, and the one TaskExit. mu guards it (and what the process embedding it adds); every
// change of state goes through transition.
type life struct {
	events       Events
	taskID, id   string // for its events: the task's id and the process's
	mu           sync.Mutex
	state        procState
	pid          uint32
	exitStatus   uint32
	exitedAt     time.Time
	exitOnce     sync.Once
	done         chan struct{} // closed once the exit was recorded and its TaskExit published
	execIDForLog string
}

// init sets up a created process's life in place (it holds a lock and must not be copied).
func (l *life) init(events Events, taskID, id string) {
	l.events, l.taskID, l.id = events, taskID, id
	if id != taskID {
		l.execIDForLog = id
	}
	l.state, l.done = createdState{}, make(chan struct{})
}

func (l *life) lifecycle() *life { return l }

func (l *life) logger(ctx context.Context) *log.Entry {
	e := log.G(ctx).WithField("task", l.taskID)
	if l.execIDForLog != "" {
		e = e.WithField("exec", l.execIDForLog)
	}
	return e
}

// transition applies one operation of the current state and commits its result. l.mu is held.
func (l *life) transition(op func(procState) (procState, error)) error {
	next, err := op(l.state)
	if err != nil {
		return err
	}
	l.state = next
	return nil
}

// ask returns the current state's answer to a question (canExec, canDeleteTask).
func (l *life) ask(question func(procState) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return question(l.state)
}

// check reports whether op is legal now, without committing it: for an operation whose HCS
// call is made without the lock and committed afterwards with commitFrom.
func (l *life) check(op func(procState) (procState, error)) (from procState, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = op(l.state)
	return l.state, err
}

// commitFrom commits op, checked legal from the state from, unless the state changed since
// (the process exited meanwhile: stopped wins). It reports whether op was committed.
func (l *life) commitFrom(from procState, op func(procState) (procState, error)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == from && l.transition(op) == nil
}

// delete commits the delete transition and returns the final status.
func (l *life) delete() (Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.transition(procState.delete)
	return l.statusLocked().deletedStatus(), err
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
func (l *life) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statusLocked()
}

func (l *life) statusLocked() Status {
	return Status{State: l.state.String(), Status: l.state.Status(), Pid: l.pid, ExitStatus: l.exitStatus, ExitedAt: l.exitedAt}
}

// deletedStatus is the status Delete reports: a process deleted without ever running reports
// now as its exit time.
func (st Status) deletedStatus() Status {
	if st.ExitedAt.IsZero() {
		st.ExitedAt = time.Now()
	}
	return st
}

// recordExit moves the process to stopped and publishes its TaskExit, exactly once.
func (l *life) recordExit(ctx context.Context, code uint32, at time.Time) {
	l.exitOnce.Do(func() {
		l.mu.Lock()
		if err := l.transition(procState.exited); err != nil {
			l.logger(ctx).WithError(err).Error("record exit")
		}
		l.exitStatus, l.exitedAt = code, at
		pid := l.pid
		l.mu.Unlock()
		l.logger(ctx).WithFields(log.Fields{"pid": pid, "exitStatus": code}).Info("process exited")
		l.events.Send(runtime.TaskExitEventTopic, &eventstypes.TaskExit{
			ContainerID: l.taskID,
			ID:          l.id,
			Pid:         pid,
			ExitStatus:  code,
			ExitedAt:    timestamppb.New(at),
		})
		close(l.done)
	})
}

// Wait blocks until the process exited (and its TaskExit was published) or ctx ends.
func (l *life) Wait(ctx context.Context) (Status, error) {
	select {
	case <-l.done:
		return l.Status(), nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// exited reports whether the process's exit was recorded.
func (l *life) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}
