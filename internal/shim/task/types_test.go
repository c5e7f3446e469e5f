package task

import (
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

func TestTimeoutFromEnv(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  time.Duration
		bad   bool
	}{
		{"", 0, false},
		{"5", 5 * time.Second, false},
		{"240", 4 * time.Minute, false},
		{"0", 0, true},
		{"-3", 0, true},
		{"1.5", 0, true},
		{"ten", 0, true},
		{"99999999999", 0, true},
	} {
		t.Setenv(TimeoutEnv, tt.value)
		got, err := TimeoutFromEnv()
		if tt.bad {
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), TimeoutEnv) || !strings.Contains(err.Error(), tt.value) {
				t.Errorf("%s=%q: %v, %v; want an invalid-argument error naming the variable and the value", TimeoutEnv, tt.value, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s=%q: %v, %v; want %v", TimeoutEnv, tt.value, got, err, tt.want)
		}
	}
}

func TestDepsTimeouts(t *testing.T) {
	var d Deps
	if d.createTimeout() != CreateTimeout || d.callTimeout() != HCSCallTimeout {
		t.Errorf("defaults: %v, %v; want %v, %v", d.createTimeout(), d.callTimeout(), CreateTimeout, HCSCallTimeout)
	}
	d.HCSTimeout = 7 * time.Second
	if d.createTimeout() != 7*time.Second || d.callTimeout() != 7*time.Second {
		t.Errorf("with HCSTimeout 7s: %v, %v; want 7s for both", d.createTimeout(), d.callTimeout())
	}
}
