package sandbox

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// Every state answers every operation: the legal ones with the next state, the others with an
// error of a kind containerd maps (FailedPrecondition, Unavailable to retry, NotFound once shut
// down) that names the operation or the state.
func TestStateTable(t *testing.T) {
	states := []sbState{createdState{}, startingState{}, readyState{}, stoppingState{}, stoppedState{}, shutdownState{}}
	type op struct {
		name string
		do   func(sbState) (sbState, error)
	}
	ops := []op{
		{"start", sbState.start},
		{"started", sbState.started},
		{"startFailed", sbState.startFailed},
		{"stop", func(s sbState) (sbState, error) { n, _, err := s.stop(); return n, err }},
		{"stopFailed", sbState.stopFailed},
		{"exited", sbState.exited},
		{"shutdown", sbState.shutdown},
	}
	legal := map[string]string{
		"created/start": "starting", "created/stop": "stopped",
		"starting/started": "ready", "starting/startFailed": "created", "starting/exited": "stopped",
		"ready/stop": "stopping", "ready/exited": "stopped",
		"stopping/stop": "stopping", "stopping/stopFailed": "ready", "stopping/exited": "stopped",
		"stopped/stop": "stopped", "stopped/shutdown": "shut down",
	}
	for _, s := range states {
		for _, o := range ops {
			key := s.String() + "/" + o.name
			next, err := o.do(s)
			if want, ok := legal[key]; ok {
				if err != nil || next.String() != want {
					t.Errorf("%s: %v, %v; want %s", key, next, err, want)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: allowed (next %s)", key, next)
				continue
			}
			if !errdefs.IsFailedPrecondition(err) && !errdefs.IsUnavailable(err) && !errdefs.IsNotFound(err) {
				t.Errorf("%s: %v: not a FailedPrecondition, Unavailable or NotFound", key, err)
			}
			if !strings.Contains(err.Error(), s.String()) && !strings.Contains(err.Error(), "shut down") && !strings.Contains(err.Error(), "being started") {
				t.Errorf("%s: %q names neither the state nor the reason", key, err)
			}
		}
		// Only a ready sandbox takes containers, answers pings and is measured.
		for name, q := range map[string]func() error{"canJoin": s.canJoin, "ping": s.ping, "canMeasure": s.canMeasure} {
			if err := q(); (err == nil) != (s.String() == "ready") {
				t.Errorf("%s/%s: %v", s, name, err)
			}
		}
		if want := map[bool]string{true: StateReady, false: StateNotReady}[s.String() == "ready"]; s.Status() != want {
			t.Errorf("%s: Status %s, want %s", s, s.Status(), want)
		}
	}
}
