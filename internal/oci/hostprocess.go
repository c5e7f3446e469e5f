package oci

import (
	"fmt"
	"strconv"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

// HostProcess annotations, spelled as hcsshim publishes them (pkg/annotations/annotations.go)
// and containerd's CRI sets the first (internal/cri/annotations: WindowsHostProcess, "true" or
// "false" on every sandbox and container). See docs/notes/hostprocess.md.
const (
	AnnotationHostProcess               = "microsoft.com/hostprocess-container"
	AnnotationHostProcessInheritUser    = "microsoft.com/hostprocess-inherit-user"
	AnnotationHostProcessRootfsLocation = "microsoft.com/hostprocess-rootfs-location"
	AnnotationDisableHostProcess        = "microsoft.com/disable-hostprocess-container"
)

// HostProcess reports whether s asks for a HostProcess (job) container: the annotation
// microsoft.com/hostprocess-container is "true" (hcsshim: IsJobContainer compares with
// "true"; CRI writes strconv.FormatBool). Any value other than "true" or "false" is refused,
// naming it, rather than read as false; and a HostProcess container is refused when
// microsoft.com/disable-hostprocess-container is true (the operator's switch, set in a runtime
// handler's default_container_annotations; hcsshim refuses the pair as an annotation
// conflict, internal/oci/annotations.go).
//
// A HostProcess container with Hyper-V isolation is refused, naming what asked for it: it runs
// on the host, and hcsshim's HostProcess-in-a-utility-VM needs guest support that Microsoft's
// HCS schema does not publish (docs/notes/hostprocess.md §4).
func HostProcess(s *specs.Spec, opts *options.Options) (bool, error) {
	v, ok := s.Annotations[AnnotationHostProcess]
	if !ok || v == "false" {
		return false, nil
	}
	if v != "true" {
		return false, fmt.Errorf("annotation %s=%q: want \"true\" or \"false\": %w", AnnotationHostProcess, v, errdefs.ErrInvalidArgument)
	}
	if d, ok := s.Annotations[AnnotationDisableHostProcess]; ok {
		disabled, err := strconv.ParseBool(d)
		if err != nil {
			return false, fmt.Errorf("annotation %s=%q: want a boolean: %w", AnnotationDisableHostProcess, d, errdefs.ErrInvalidArgument)
		}
		if disabled {
			return false, fmt.Errorf("annotation %s=%q: HostProcess containers are disabled on this runtime handler (annotation %s=%q): %w",
				AnnotationHostProcess, v, AnnotationDisableHostProcess, d, errdefs.ErrPermissionDenied)
		}
	}
	if iso, askedBy := ChooseIsolation(s, opts); iso == IsolationHyperV {
		return false, fmt.Errorf("annotation %s=%q with Hyper-V isolation (%s): a HostProcess container runs on the host, not in a utility VM; use a process-isolated runtime handler such as runhcs-wcow-process: %w",
			AnnotationHostProcess, v, askedBy, errdefs.ErrInvalidArgument)
	}
	return true, nil
}

// HostProcessInheritUser reports whether a HostProcess container runs with the shim's own
// token instead of its user's (microsoft.com/hostprocess-inherit-user = "true", as hcsshim
// reads it: jobcontainers/oci.go inheritUserTokenIsSet).
func HostProcessInheritUser(s *specs.Spec) bool {
	return s.Annotations[AnnotationHostProcessInheritUser] == "true"
}
