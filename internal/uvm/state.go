package uvm

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// vmState is one state of a utility VM (after runc's process/init_state.go and the shim's
// task/state.go): each state answers every operation with the next state or an error naming
// the illegal transition. States hold no data; the VM does, under its mutex. No HCS call is
// made under that mutex: start moves to starting first, and the outcome is committed after.
type vmState interface {
	String() string
	// start begins starting the VM; started and startFailed commit the outcome.
	start() (vmState, error)
	started() (vmState, error)
	startFailed() (vmState, error)
	// canModify says whether resources may be added to the VM now.
	canModify() error
	// exited records that the VM stopped (terminated, or by itself).
	exited() vmState
	// close records that the handle was released.
	close() vmState
	// gone says the VM no longer exists for its resources: releases succeed without HCS.
	gone() bool
}

type (
	createdState  struct{}
	startingState struct{}
	runningState  struct{}
	stoppedState  struct{}
	closedState   struct{}
)

func illegal(op string, s vmState) error {
	return fmt.Errorf("cannot %s a %s utility VM: %w", op, s, errdefs.ErrFailedPrecondition)
}

func (createdState) String() string                  { return "created" }
func (createdState) start() (vmState, error)         { return startingState{}, nil }
func (s createdState) started() (vmState, error)     { return nil, illegal("commit the start of", s) }
func (s createdState) startFailed() (vmState, error) { return nil, illegal("fail the start of", s) }
func (s createdState) canModify() error              { return illegal("add resources to", s) }
func (createdState) exited() vmState                 { return stoppedState{} }
func (createdState) close() vmState                  { return closedState{} }
func (createdState) gone() bool                      { return false }

func (startingState) String() string                { return "starting" }
func (s startingState) start() (vmState, error)     { return nil, illegal("start", s) }
func (startingState) started() (vmState, error)     { return runningState{}, nil }
func (startingState) startFailed() (vmState, error) { return createdState{}, nil }
func (s startingState) canModify() error            { return illegal("add resources to", s) }
func (startingState) exited() vmState               { return stoppedState{} }
func (startingState) close() vmState                { return closedState{} }
func (startingState) gone() bool                    { return false }

func (runningState) String() string                  { return "running" }
func (s runningState) start() (vmState, error)       { return nil, illegal("start", s) }
func (s runningState) started() (vmState, error)     { return nil, illegal("commit the start of", s) }
func (s runningState) startFailed() (vmState, error) { return nil, illegal("fail the start of", s) }
func (runningState) canModify() error                { return nil }
func (runningState) exited() vmState                 { return stoppedState{} }
func (runningState) close() vmState                  { return closedState{} }
func (runningState) gone() bool                      { return false }

func (stoppedState) String() string                  { return "stopped" }
func (s stoppedState) start() (vmState, error)       { return nil, illegal("start", s) }
func (s stoppedState) started() (vmState, error)     { return nil, illegal("commit the start of", s) }
func (s stoppedState) startFailed() (vmState, error) { return nil, illegal("fail the start of", s) }
func (s stoppedState) canModify() error              { return illegal("add resources to", s) }
func (stoppedState) exited() vmState                 { return stoppedState{} }
func (stoppedState) close() vmState                  { return closedState{} }
func (stoppedState) gone() bool                      { return true }

func (closedState) String() string                  { return "closed" }
func (s closedState) start() (vmState, error)       { return nil, illegal("start", s) }
func (s closedState) started() (vmState, error)     { return nil, illegal("commit the start of", s) }
func (s closedState) startFailed() (vmState, error) { return nil, illegal("fail the start of", s) }
func (s closedState) canModify() error              { return illegal("add resources to", s) }
func (closedState) exited() vmState                 { return closedState{} }
func (closedState) close() vmState                  { return closedState{} }
func (closedState) gone() bool                      { return true }
