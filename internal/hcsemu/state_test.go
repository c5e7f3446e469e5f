package hcsemu

import (
	"errors"
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
