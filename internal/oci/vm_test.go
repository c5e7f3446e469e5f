package oci

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

// TestVMSizingErrors: a bad utility VM size is refused naming the annotation or option and
// its value. (The sizes VMSizing picks, in their order, are pinned by internal/uvm's golden VM
// documents, TestDocument.)
func TestVMSizingErrors(t *testing.T) {
	tests := []struct {
		name  string
		annot map[string]string
		opts  *options.Options
		named string
	}{
		{"memory not a number", map[string]string{AnnotationVMMemorySizeInMB: "lots"}, nil, AnnotationVMMemorySizeInMB + `="lots"`},
		{"memory zero", map[string]string{AnnotationVMMemorySizeInMB: "0"}, nil, "0 MB"},
		{"negative option", nil, &options.Options{VmMemorySizeInMb: -5}, "vm_memory_size_in_mb=-5"},
		{"cpu zero", map[string]string{AnnotationVMProcessorCount: "0"}, nil, AnnotationVMProcessorCount + "=0"},
		{"cpu limit out of range", map[string]string{AnnotationVMProcessorLimit: "100001"}, nil, AnnotationVMProcessorLimit + `="100001"`},
		{"cpu weight out of range", map[string]string{AnnotationVMProcessorWeight: "-1"}, nil, AnnotationVMProcessorWeight + `="-1"`},
		{"overcommit not a bool", map[string]string{AnnotationVMAllowOvercommit: "maybe"}, nil, AnnotationVMAllowOvercommit + `="maybe"`},
		{"deferred without overcommit", map[string]string{AnnotationVMAllowOvercommit: "false", AnnotationVMEnableDeferredCommit: "true"}, nil, AnnotationVMEnableDeferredCommit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VMSizing(&specs.Spec{Annotations: tc.annot}, tc.opts, 4)
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.named) {
				t.Errorf("VMSizing: %v, want InvalidArgument naming %q", err, tc.named)
			}
		})
	}
}

// TestVMSizingHostZero: a host that reports no processors cannot size a VM.
func TestVMSizingHostZero(t *testing.T) {
	if _, err := VMSizing(&specs.Spec{}, nil, 0); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("VMSizing with 0 host processors: %v, want FailedPrecondition", err)
	}
}
