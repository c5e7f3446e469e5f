package compute

import (
	"errors"
	"slices"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

func TestTransition(t *testing.T) {
	const (
		created = schema2.StateCreated
		running = schema2.StateRunning
		paused  = schema2.StatePaused
		stopped = schema2.StateStopped
	)
	invalid := computecore.HCS_E_INVALID_STATE
	already := computecore.HCS_E_SYSTEM_ALREADY_STOPPED
	tests := []struct {
		from    schema2.State
		op      systemOp
		want    schema2.State
		wantErr error
	}{
		{created, opStart, running, nil},
		{created, opPause, created, invalid},
		{created, opResume, created, invalid},
		{created, opShutdown, stopped, nil},
		{created, opTerminate, stopped, nil},
		{running, opStart, running, invalid},
		{running, opPause, paused, nil},
		{running, opResume, running, invalid},
		{running, opShutdown, stopped, nil},
		{running, opTerminate, stopped, nil},
		{paused, opStart, paused, invalid},
		{paused, opPause, paused, invalid},
		{paused, opResume, running, nil},
		{paused, opShutdown, paused, invalid},
		{paused, opTerminate, stopped, nil},
		{stopped, opStart, stopped, invalid},
		{stopped, opPause, stopped, invalid},
		{stopped, opResume, stopped, invalid},
		{stopped, opShutdown, stopped, already},
		{stopped, opTerminate, stopped, already},
		// Create and the system's own end.
		{stateNone, opCreate, created, nil},
		{created, opCreate, created, invalid},
		{stateNone, opExit, stopped, nil},
		{created, opExit, stopped, nil},
		{running, opExit, stopped, nil},
		{paused, opExit, stopped, nil},
		{stopped, opExit, stopped, invalid},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"/"+string(tt.op), func(t *testing.T) {
			got, err := transition("sys1", tt.from, tt.op)
			if got != tt.want {
				t.Errorf("state %s, want %s", got, tt.want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			var e *hresult.Error
			if !errors.As(err, &e) || !containsAll(e.Message, "sys1", string(tt.op)) {
				t.Errorf("error %q does not name the system and the operation", err)
			}
		})
	}
}

// TestAllowed checks the operations that need a state and keep it: processes only in a running
// system, a VM modified while Created or Running, containers hosted only in a running VM.
func TestAllowed(t *testing.T) {
	for _, tt := range []struct {
		op   systemOp
		want []schema2.State
	}{
		{opCreateProcess, []schema2.State{schema2.StateRunning}},
		{opModifyVM, []schema2.State{schema2.StateCreated, schema2.StateRunning}},
		{opHost, []schema2.State{schema2.StateRunning}},
	} {
		for _, st := range []schema2.State{stateNone, schema2.StateCreated, schema2.StateRunning, schema2.StatePaused, schema2.StateStopped} {
			if got, want := allowed(st, tt.op), slices.Contains(tt.want, st); got != want {
				t.Errorf("allowed(%q, %s) = %v, want %v", st, tt.op, got, want)
			}
			if to, err := transition("sys1", st, tt.op); err == nil && to != st {
				t.Errorf("%s in state %q moves the system to %s; it must keep its state", tt.op, st, to)
			}
		}
	}
}
