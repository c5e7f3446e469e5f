package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	winio "github.com/Microsoft/go-winio"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
)

// TestTaskLogPipe: a task that joined the pod's shim has the log pipe containerd dials for it
// (containerd's openShimLog retries a missing one for 5 s, and deleting the task waits for that
// dial: StopPodSandbox stalled there) until it is deleted; the shim's own task has none from
// the service (containerd's shim package serves that one).
func TestTaskLogPipe(t *testing.T) {
	h := newHarness(t)
	own := fmt.Sprintf("own-%d", os.Getpid())
	joined := fmt.Sprintf("joined-%d", os.Getpid())
	h.svc.logs.skip = own
	second := time.Second
	dial := func(id string) error {
		c, err := winio.DialPipe(taskLogPipe("test", id), &second)
		if err == nil {
			c.Close()
		}
		return err
	}

	p := h.createStart(h.bundle(joined, testSpec()))
	h.createStart(h.bundle(own, testSpec()))
	if err := dial(joined); err != nil {
		t.Fatalf("log pipe of a task that joined the shim: %v", err)
	}
	// Again, as containerd does after a restart.
	if err := dial(joined); err != nil {
		t.Fatalf("log pipe of a task that joined the shim, second connection: %v", err)
	}
	if err := dial(own); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log pipe of the shim's own task from the service: %v; want none (pkg/shim serves it)", err)
	}

	p.exit(0)
	ctx := context.Background()
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: joined}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: joined}); err != nil {
		t.Fatal(err)
	}
	if err := dial(joined); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log pipe after Delete: %v; want it gone", err)
	}

	// A create that fails leaves no pipe.
	h.host.createErr = errors.New("injected")
	failed := fmt.Sprintf("failed-%d", os.Getpid())
	if _, err := h.svc.Create(ctx, h.bundle(failed, testSpec())); err == nil {
		t.Fatal("Create succeeded")
	}
	if err := dial(failed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log pipe after a failed create: %v; want none", err)
	}
}
