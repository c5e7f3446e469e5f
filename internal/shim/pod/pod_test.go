package pod

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// TestReservations: an id is reserved while its task is created, so a second create of it is
// refused; a failed create frees it; Len counts tasks being created too. (The pod's rules with
// real tasks are tested through the task service, internal/shim hyperv_test.go.)
func TestReservations(t *testing.T) {
	p := New(&task.Deps{})
	if err := p.Reserve("c1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve("c1"); !errdefs.IsAlreadyExists(err) || !strings.Contains(err.Error(), "being created") {
		t.Errorf("second Reserve: %v, want AlreadyExists (being created)", err)
	}
	if n := p.Len(); n != 1 {
		t.Errorf("Len = %d while creating, want 1", n)
	}
	p.Commit("c1", nil) // the create failed
	if n := p.Len(); n != 0 {
		t.Errorf("Len = %d after a failed create, want 0", n)
	}
	if _, err := p.Get("c1"); !errdefs.IsNotFound(err) {
		t.Errorf("Get after a failed create: %v, want NotFound", err)
	}
	if err := p.Reserve("c1"); err != nil {
		t.Errorf("Reserve after a failed create: %v", err)
	}
}

// TestProcessPodRules: a pod without a VM sandbox is process-isolated, has no VM to host a
// container in, and takes process-isolated containers.
func TestProcessPodRules(t *testing.T) {
	p := New(&task.Deps{})
	if iso := p.Isolation(); iso != oci.IsolationProcess {
		t.Errorf("Isolation = %v, want process", iso)
	}
	if p.VMSandbox() != nil {
		t.Error("VMSandbox of a process-isolated pod is not nil")
	}
	_, err := p.CreateHosted(context.Background(), "pod", task.Config{ID: "c1"}, "")
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), oci.AnnotationSandboxID+`="pod"`) {
		t.Errorf("CreateHosted without a VM sandbox: %v, want FailedPrecondition naming the sandbox id", err)
	}
	if err := p.refuseMixed("c1", "pod"); err != nil {
		t.Errorf("a process-isolated container in a process-isolated pod: %v", err)
	}
}
