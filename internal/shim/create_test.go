package shim

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs"
)

// TestImageMismatchExplained: HCS's refusal of a process-isolated container of another build
// (HCS_E_IMAGE_MISMATCH, whose message names no build) reaches containerd naming the host's
// build and the ways out, still FailedPrecondition and still carrying HCS's error.
func TestImageMismatchExplained(t *testing.T) {
	h := newHarness(t)
	h.host.createErr = &hcs.Error{Op: "CreateComputeSystem", ID: "c1", Err: computecore.HCS_E_IMAGE_MISMATCH,
		Detail: "the operating system of the container (build 10.0.17763.1) does not match the operating system of the host (build 10.0.20348.1)"}
	_, err := h.svc.Create(context.Background(), h.bundle("c1", testSpec()))
	if err == nil {
		t.Fatal("Create succeeded")
	}
	for _, want := range []string{"host: 10.0.20348.1", "runhcs-wcow-hypervisor", "0x80370101", "build 10.0.17763.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Create = %v; want it to name %q", err, want)
		}
	}
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Create = %v; want FailedPrecondition", err)
	}
	if h.layers.count() != 0 {
		t.Errorf("%d layer chains left mounted", h.layers.count())
	}
}
