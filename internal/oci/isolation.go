package oci

import (
	"fmt"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"

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
// per runtime handler), or the legacy pod annotation (docs/architecture.md, "Isolation").
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

// ResolveIsolation decides a task's isolation from its spec and the runtime options, and
// records a Hyper-V choice in the spec: with sandbox_isolation=HYPERVISOR the spec gets an
// empty windows.hyperv section (as hcsshim's createInternal in
// cmd/containerd-shim-runhcs-v1/service_internal.go fills it, so containerd need not), and so
// does a spec that asked through the legacy pod annotation. A spec that carries windows.hyperv
// (or the legacy annotation) while non-empty runtime options say PROCESS is refused, as hcsshim
// refuses it ("invalid runtime sandbox isolation (PROCESS) for hypervisor isolated OCI spec"):
// the runtime handler chose process isolation. Empty options (or none) are not a choice;
// sandbox_isolation=PROCESS alone is indistinguishable from them on the wire, as in hcsshim.
func ResolveIsolation(s *specs.Spec, opts *options.Options) (Isolation, error) {
	iso, askedBy := ChooseIsolation(s, opts)
	if iso == IsolationProcess {
		return IsolationProcess, nil
	}
	if opts.GetSandboxIsolation() != options.Options_HYPERVISOR && opts != nil && !proto.Equal(opts, &options.Options{}) {
		return 0, fmt.Errorf("%s asks for Hyper-V isolation, but the runtime options say sandbox_isolation=%s: %w", askedBy, opts.GetSandboxIsolation(), errdefs.ErrInvalidArgument)
	}
	if s.Windows == nil {
		return 0, ErrNoWindowsSection
	}
	if s.Windows.HyperV == nil {
		s.Windows.HyperV = &specs.WindowsHyperV{}
	}
	return IsolationHyperV, nil
}
