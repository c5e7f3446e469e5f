package compute

import (
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// systemOp is an operation that moves a compute system between states.
type systemOp string

const (
	opStart     systemOp = "Start"
	opPause     systemOp = "Pause"
	opResume    systemOp = "Resume"
	opShutdown  systemOp = "Shutdown"
	opTerminate systemOp = "Terminate"
	// opCreate makes a new system Created, once its create has succeeded.
	opCreate systemOp = "Create"
	// opExit is the system ending by itself or by force: the last process of a container
	// exiting, a VM's init dying, a crash fault, or the end of Shutdown and Terminate.
	opExit systemOp = "Exit"
	// The operations that need a state and keep it: a process created in a system, a utility
	// VM modified, a container hosted in a VM (or given a mapped directory through it).
	opCreateProcess systemOp = "CreateProcess"
	opModifyVM      systemOp = "ModifyVM"
	opHost          systemOp = "Host"
)

// stateNone is a system's state before its create has succeeded.
const stateNone schema2.State = ""

// transitions is HCS's state machine for a compute system: Created → Running ⇄ Paused →
// Stopped. Terminate stops a system from any live state; Shutdown from Created or Running
// (a paused system must be resumed first, as HCS cannot deliver the shutdown to a frozen
// silo). Anything not listed is HCS_E_INVALID_STATE, except that stopping a stopped system is
// HCS_E_SYSTEM_ALREADY_STOPPED (hcsshim treats that as success for terminate and shutdown).
// Every change of a system's state goes through it (moveLocked), and so do the checks of the
// operations that need a state (allowed).
var transitions = map[schema2.State]map[systemOp]schema2.State{
	stateNone: {
		opCreate: schema2.StateCreated,
		// A system whose create failed half-way is stopped as it is torn down.
		opExit: schema2.StateStopped,
	},
	schema2.StateCreated: {
		opStart:     schema2.StateRunning,
		opShutdown:  schema2.StateStopped,
		opTerminate: schema2.StateStopped,
		opExit:      schema2.StateStopped,
		opModifyVM:  schema2.StateCreated,
	},
	schema2.StateRunning: {
		opPause:         schema2.StatePaused,
		opShutdown:      schema2.StateStopped,
		opTerminate:     schema2.StateStopped,
		opExit:          schema2.StateStopped,
		opCreateProcess: schema2.StateRunning,
		opModifyVM:      schema2.StateRunning,
		opHost:          schema2.StateRunning,
	},
	schema2.StatePaused: {
		opResume:    schema2.StateRunning,
		opTerminate: schema2.StateStopped,
		opExit:      schema2.StateStopped,
	},
	schema2.StateStopped: {},
}

// transition returns the state op leads to from from, or the HCS error for an invalid one.
func transition(id string, from schema2.State, op systemOp) (schema2.State, error) {
	if to, ok := transitions[from][op]; ok {
		return to, nil
	}
	if from == schema2.StateStopped && (op == opShutdown || op == opTerminate) {
		return from, hresult.Errorf(computecore.HCS_E_SYSTEM_ALREADY_STOPPED, "%s of compute system %q: it has already stopped", op, id)
	}
	return from, hresult.Errorf(computecore.HCS_E_INVALID_STATE, "%s of compute system %q: not valid in state %s", op, id, from)
}

// allowed reports whether op is valid in state from.
func allowed(from schema2.State, op systemOp) bool {
	_, ok := transitions[from][op]
	return ok
}
