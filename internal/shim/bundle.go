package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
)

// stateFile is what a task leaves in its bundle so that the `delete` action, run by
// containerd after the shim died, can find what to clean up.
const stateFile = "runhcs-state.json"

// bundleState is the content of stateFile.
type bundleState struct {
	// SystemID is the id of the task's compute system.
	SystemID string `json:"systemId"`
	// Layers is the mounted chain, nil if none was mounted.
	Layers *layers.Chain `json:"layers,omitempty"`
	// InitPid is the init process's pid once it started, so that the delete action reports the
	// exit of that pid (as runc's shim does) rather than of pid 0.
	InitPid uint32 `json:"initPid,omitempty"`
	// Namespace is the HNS namespace the shim made for the task's endpoint list, and
	// Endpoints those endpoints (network.go); empty when CRI made the namespace.
	Namespace string   `json:"namespace,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
}

// recordInitPid adds the started init process's pid to the bundle's state.
func recordInitPid(bundle string, pid uint32) error {
	st, err := readBundleState(bundle)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("record init pid %d: bundle %q has no task state", pid, bundle)
	}
	st.InitPid = pid
	return writeBundleState(bundle, st)
}

func writeBundleState(bundle string, st *bundleState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	p := filepath.Join(bundle, stateFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write task state %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write task state %q: %w", p, err)
	}
	return nil
}

// readBundleState returns (nil, nil) when the bundle has no state.
func readBundleState(bundle string) (*bundleState, error) {
	b, err := os.ReadFile(filepath.Join(bundle, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read task state in bundle %q: %w", bundle, err)
	}
	var st bundleState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("task state %q: %w", filepath.Join(bundle, stateFile), err)
	}
	return &st, nil
}

func removeBundleState(bundle string) error {
	if err := os.Remove(filepath.Join(bundle, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove task state in bundle %q: %w", bundle, err)
	}
	return nil
}

// readSpec reads the bundle's config.json and checks it is a Windows spec.
func readSpec(bundle string) (*specs.Spec, error) {
	p := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read OCI spec: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("OCI spec %q: %v: %w", p, err, errdefs.ErrInvalidArgument)
	}
	if s.Windows == nil {
		return nil, oci.ErrNoWindowsSection
	}
	return &s, nil
}
