package oci

import (
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

func TestHostProcess(t *testing.T) {
	hyperv := &options.Options{SandboxIsolation: options.Options_HYPERVISOR}
	for _, c := range []struct {
		name string
		ann  map[string]string
		hv   bool
		opts *options.Options
		want bool
		kind func(error) bool
	}{
		{"absent", nil, false, nil, false, nil},
		{"false (CRI, normal pod)", map[string]string{AnnotationHostProcess: "false"}, false, nil, false, nil},
		{"true", map[string]string{AnnotationHostProcess: "true"}, false, nil, true, nil},
		{"true, disable false", map[string]string{AnnotationHostProcess: "true", AnnotationDisableHostProcess: "false"}, false, nil, true, nil},
		{"disabled, not asked", map[string]string{AnnotationDisableHostProcess: "true"}, false, nil, false, nil},
		{"disabled", map[string]string{AnnotationHostProcess: "true", AnnotationDisableHostProcess: "1"}, false, nil, false, errdefs.IsPermissionDenied},
		{"disable not a bool", map[string]string{AnnotationHostProcess: "true", AnnotationDisableHostProcess: "maybe"}, false, nil, false, errdefs.IsInvalidArgument},
		{"not a bool", map[string]string{AnnotationHostProcess: "TRUE"}, false, nil, false, errdefs.IsInvalidArgument},
		{"spec asks Hyper-V", map[string]string{AnnotationHostProcess: "true"}, true, nil, false, errdefs.IsInvalidArgument},
		{"handler asks Hyper-V", map[string]string{AnnotationHostProcess: "true"}, false, hyperv, false, errdefs.IsInvalidArgument},
	} {
		s := &specs.Spec{Annotations: c.ann, Windows: &specs.Windows{}}
		if c.hv {
			s.Windows.HyperV = &specs.WindowsHyperV{}
		}
		got, err := HostProcess(s, c.opts)
		if c.kind != nil {
			if !c.kind(err) {
				t.Errorf("%s: HostProcess = %v, %v; want an error of the right kind", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: HostProcess = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
