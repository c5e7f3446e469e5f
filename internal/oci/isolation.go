package oci

import (
	"fmt"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

// ApplyOptions applies the runtime options to a task's spec before it is translated: the
// options' default_container_annotations are added where the spec does not set them itself
// (hcsshim's DefaultContainerAnnotations).
func ApplyOptions(s *specs.Spec, opts *options.Options) {
	defaults := opts.GetDefaultContainerAnnotations()
	if len(defaults) == 0 {
		return
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	for k, v := range defaults {
		if _, ok := s.Annotations[k]; !ok {
			s.Annotations[k] = v
		}
	}
}

// Isolation is how a task is isolated from the host.
type Isolation int

const (
	// IsolationProcess shares the host's kernel (a Windows silo); the default.
	IsolationProcess Isolation = iota
	// IsolationHyperV runs the task in a utility VM.
	IsolationHyperV
)

func (i Isolation) String() string {
	if i == IsolationHyperV {
		return "Hyper-V"
	}
	return "process"
}

// ChooseIsolation returns the isolation a task asks for and, for Hyper-V, what asked for it:
// the spec's windows.hyperv section, the runtime options' sandbox_isolation (HYPERVISOR, set
// per runtime handler), or the legacy pod annotation (DESIGN.md, isolation).
func ChooseIsolation(s *specs.Spec, opts *options.Options) (_ Isolation, askedBy string) {
	switch {
	case s.Windows != nil && s.Windows.HyperV != nil:
		return IsolationHyperV, "spec windows.hyperv"
	case opts.GetSandboxIsolation() == options.Options_HYPERVISOR:
		return IsolationHyperV, "runtime option sandbox_isolation=HYPERVISOR"
	case s.Annotations[AnnotationLegacyIsolation] == legacyIsolationHyperVValue:
		return IsolationHyperV, fmt.Sprintf("annotation %s=%s", AnnotationLegacyIsolation, legacyIsolationHyperVValue)
	}
	return IsolationProcess, ""
}

// RequireProcessIsolation refuses a task that asks for Hyper-V isolation, naming what asked:
// this shim does not implement utility VMs yet. It is the one place that refuses it.
func RequireProcessIsolation(s *specs.Spec, opts *options.Options) error {
	if iso, askedBy := ChooseIsolation(s, opts); iso != IsolationProcess {
		return fmt.Errorf("%s: %s isolation is not supported by this shim yet: %w", askedBy, iso, errdefs.ErrNotImplemented)
	}
	return nil
}
