package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// StateFile is what a sandbox records in its bundle so that the shim's `delete` action, run by
// containerd after the sandbox's shim died, knows the bundle is a sandbox's and what it held.
// A task's state is internal/shim/task's runhcs-state.json; a sandbox bundle has no
// config.json (containerd's sandbox controller makes it without a spec).
const StateFile = "runhcs-sandbox.json"

// bundleState is the content of StateFile.
type bundleState struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	NetNS     string    `json:"netns,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Pid is the pod's pid once it started, for the delete action's report.
	Pid uint32 `json:"pid,omitempty"`
	// Boot is what a Hyper-V pod made for its VM's boot layer, recorded before it is made.
	Boot *BootRecord `json:"boot,omitempty"`
}

func writeState(bundle string, st *bundleState) error {
	if err := atomicfile.WriteJSON(filepath.Join(bundle, StateFile), st, 0o600); err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	return nil
}

// readState returns (nil, nil) when the bundle has no sandbox state.
func readState(bundle string) (*bundleState, error) {
	var st bundleState
	if found, err := atomicfile.ReadJSON(filepath.Join(bundle, StateFile), &st); !found || err != nil {
		if err != nil {
			return nil, fmt.Errorf("sandbox state: %w", err)
		}
		return nil, nil
	}
	return &st, nil
}

// updateState changes the recorded state of bundle with f; what names the change in errors.
func updateState(bundle, what string, f func(*bundleState)) error {
	st, err := readState(bundle)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("record %s: bundle %q has no sandbox state", what, bundle)
	}
	f(st)
	return writeState(bundle, st)
}

func recordPid(bundle string, pid uint32) error {
	return updateState(bundle, fmt.Sprintf("pid %d", pid), func(st *bundleState) { st.Pid = pid })
}

func recordBoot(bundle string, r BootRecord) error {
	return updateState(bundle, "boot image "+r.Image, func(st *bundleState) { st.Boot = &r })
}

func removeState(bundle string) error {
	if err := os.Remove(filepath.Join(bundle, StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove sandbox state in bundle %q: %w", bundle, err)
	}
	return nil
}

// IsBundle reports whether bundle holds a sandbox's state (the delete action then calls
// Cleanup rather than a task's clean-up).
func IsBundle(bundle string) bool {
	_, err := os.Stat(filepath.Join(bundle, StateFile))
	return err == nil
}

// Cleanup is the delete action's part for a sandbox whose shim died: it releases what the
// sandbox held, by kind, and removes its state; it returns the pod's pid if it had started. It
// tolerates having been done already. A process-isolated pod holds nothing but its state (its
// HNS namespace is containerd's CRI's, which removes it in StopPodSandbox; its containers are
// tasks with bundles and delete actions of their own). A Hyper-V pod holds its utility VM,
// ended first through r (its containers die with it), then its boot image's view and lease.
func Cleanup(ctx context.Context, bundle string, r Releaser) (pid uint32, _ error) {
	st, err := readState(bundle)
	if err != nil || st == nil {
		return 0, err
	}
	file := filepath.Join(bundle, StateFile)
	switch st.Kind {
	case KindProcess:
	case KindHyperV:
		if r == nil {
			return 0, fmt.Errorf("sandbox state %q: a Hyper-V sandbox, and nothing to release its VM with: %w", file, errdefs.ErrNotImplemented)
		}
		if err := r.ReleaseVM(ctx, bundle); err != nil {
			return 0, fmt.Errorf("clean up sandbox %s: its utility VM: %w", st.ID, err)
		}
		if st.Boot != nil {
			if err := r.ReleaseBoot(ctx, *st.Boot); err != nil {
				return 0, fmt.Errorf("clean up sandbox %s: its boot image %s: %w", st.ID, st.Boot.Image, err)
			}
		}
	default:
		return 0, fmt.Errorf("sandbox state %q: kind %q: want %q or %q: %w", file, st.Kind, KindProcess, KindHyperV, errdefs.ErrInvalidArgument)
	}
	return st.Pid, removeState(bundle)
}
