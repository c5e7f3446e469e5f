package task

import (
	"testing"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
)

// TestStateTransitions walks every operation from every state: the table is the lifecycle.
func TestStateTransitions(t *testing.T) {
	type op func(procState) (procState, error)
	ops := map[string]op{
		"start":       procState.start,
		"started":     procState.started,
		"startFailed": procState.startFailed,
		"pause":       procState.pause,
		"resume":      procState.resume,
		"exited":      procState.exited,
		"delete":      procState.delete,
	}
	// want[state][op] is the next state, or nil when the operation is illegal there.
	want := map[procState]map[string]procState{
		createdState{}:  {"start": startingState{}, "exited": stoppedState{}, "delete": deletedState{}},
		startingState{}: {"started": runningState{}, "startFailed": createdState{}, "exited": stoppedState{}},
		runningState{}:  {"pause": pausedState{}, "exited": stoppedState{}},
		pausedState{}:   {"resume": runningState{}, "exited": stoppedState{}},
		stoppedState{}:  {"delete": deletedState{}},
		deletedState{}:  {},
	}
	for from, table := range want {
		for name, f := range ops {
			next, err := f(from)
			exp, legal := table[name]
			switch {
			case legal && (err != nil || next != exp):
				t.Errorf("%s.%s = %v, %v; want %v", from, name, next, err, exp)
			case !legal && err == nil:
				t.Errorf("%s.%s = %v; want an error", from, name, next)
			case !legal && !errdefs.IsFailedPrecondition(err) && !errdefs.IsNotFound(err):
				t.Errorf("%s.%s: error %v is neither FailedPrecondition nor NotFound", from, name, err)
			}
		}
	}
}

func TestStateKillAndStatus(t *testing.T) {
	tests := []struct {
		s      procState
		status tasktypes.Status
		kill   func(error) bool
	}{
		{createdState{}, tasktypes.Status_CREATED, func(err error) bool { return err == nil }},
		{startingState{}, tasktypes.Status_CREATED, errdefs.IsUnavailable},
		{runningState{}, tasktypes.Status_RUNNING, func(err error) bool { return err == nil }},
		{pausedState{}, tasktypes.Status_PAUSED, func(err error) bool { return err == nil }},
		{stoppedState{}, tasktypes.Status_STOPPED, errdefs.IsNotFound},
		{deletedState{}, tasktypes.Status_STOPPED, errdefs.IsNotFound},
	}
	for _, tc := range tests {
		if got := tc.s.Status(); got != tc.status {
			t.Errorf("%s.Status() = %v, want %v", tc.s, got, tc.status)
		}
		neverRan, err := tc.s.kill()
		if !tc.kill(err) {
			t.Errorf("%s.kill() = %v", tc.s, err)
		}
		if want := tc.s == (createdState{}); neverRan != want {
			t.Errorf("%s.kill() neverRan = %v, want %v", tc.s, neverRan, want)
		}
	}
}

// TestStateQuestions: what each state answers to the questions asked outside a transition.
// ok is "no error"; use is the console's and stdin's first result.
func TestStateQuestions(t *testing.T) {
	type answer struct{ use, ok bool }
	tests := []struct {
		s                  procState
		console, stdin     answer
		canExec, canDelete bool
	}{
		{createdState{}, answer{false, false}, answer{false, true}, false, true},
		{startingState{}, answer{false, false}, answer{false, true}, false, false},
		{runningState{}, answer{true, true}, answer{true, true}, true, false},
		{pausedState{}, answer{true, true}, answer{true, true}, false, false},
		{stoppedState{}, answer{false, true}, answer{false, true}, false, true},
		{deletedState{}, answer{false, false}, answer{false, false}, false, true},
	}
	for _, tc := range tests {
		if use, err := tc.s.console(); (answer{use, err == nil}) != tc.console {
			t.Errorf("%s.console() = %v, %v; want %+v", tc.s, use, err, tc.console)
		}
		if use, err := tc.s.closeStdin(); (answer{use, err == nil}) != tc.stdin {
			t.Errorf("%s.closeStdin() = %v, %v; want %+v", tc.s, use, err, tc.stdin)
		}
		if err := tc.s.canExec(); (err == nil) != tc.canExec || (err != nil && !errdefs.IsFailedPrecondition(err)) {
			t.Errorf("%s.canExec() = %v", tc.s, err)
		}
		if err := tc.s.canDeleteTask(); (err == nil) != tc.canDelete || (err != nil && !errdefs.IsFailedPrecondition(err)) {
			t.Errorf("%s.canDeleteTask() = %v", tc.s, err)
		}
	}
}

func TestSignalAction(t *testing.T) {
	tests := []struct {
		sig  uint32
		want killAction
		ok   bool
	}{
		{2, killAction{event: "CtrlC"}, true},
		{15, killAction{event: "CtrlShutdown"}, true},
		{9, killAction{terminate: true}, true},
		{1, killAction{}, false},
		{0, killAction{}, false},
		{19, killAction{}, false},
	}
	for _, tc := range tests {
		got, err := signalAction(tc.sig)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("signalAction(%d) = %+v, %v", tc.sig, got, err)
		}
		if err != nil && !errdefs.IsInvalidArgument(err) {
			t.Errorf("signalAction(%d): %v is not InvalidArgument", tc.sig, err)
		}
	}
}
