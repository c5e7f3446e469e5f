package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/openhcs/runhcs/test/harness"
)

// TestDiag drives the shim's containerd.runhcs.v1.diag.ShimDiag service through the real shim
// with cmd/shimdiag: list finds the shim through containerd's task bundles, and pid, tasks and
// stacks answer over the address the shim's start action recorded in the bundle.
func TestDiag(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 5*time.Minute)
	defer cancel()
	shimdiag := buildShimdiag(ctx, t)

	const id = "diag"
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "120")})
	if err != nil {
		t.Fatal(err)
	}
	// An exec created and not started, so tasks lists a second process with its own state.
	spec, err := tk.Container.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pspec := *spec.Process
	pspec.Args = workload("echo", "never started")
	proc, err := tk.Task.Exec(ctx, "dbg", &pspec, cio.NullIO)
	if err != nil {
		t.Fatalf("exec dbg in %s: %v", id, err)
	}

	// containerd's state directory as the harness configures it (harness_linux.go, New), and
	// the task's bundle in it (io.containerd.runtime.v2.task/<namespace>/<id>, 1.7 and 2.x).
	state := filepath.Join(env.Root, "containerd", "state")
	b, err := os.ReadFile(filepath.Join(state, "io.containerd.runtime.v2.task", harness.Namespace, id, "address"))
	if err != nil {
		t.Fatalf("the shim's address in the bundle of %s: %v", id, err)
	}
	address := strings.TrimSpace(string(b))

	shims := env.ShimPids(id)
	if len(shims) != 1 {
		t.Fatalf("shims serving %s: pids %v, want one", id, shims)
	}
	wantPid := strconv.Itoa(shims[0])

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, shimdiag, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("shimdiag %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}

	t.Run("pid", func(t *testing.T) {
		if got := strings.TrimSpace(run("pid", address)); got != wantPid {
			t.Fatalf("shimdiag pid = %q, want the shim's pid %s", got, wantPid)
		}
	})
	t.Run("tasks", func(t *testing.T) {
		out := run("tasks", address)
		t.Logf("shimdiag tasks %s:\n%s", address, out)
		got := strings.Fields(out)
		for _, want := range [][]string{{id, id, "running"}, {id, "dbg", "created"}} {
			if !containsRun(got, want) {
				t.Errorf("shimdiag tasks lacks %q:\n%s", strings.Join(want, " "), out)
			}
		}
		if ids := strings.TrimSpace(run("tasks", "--execs=false", address)); ids != id {
			t.Errorf("shimdiag tasks --execs=false = %q, want %q", ids, id)
		}
	})
	t.Run("stacks", func(t *testing.T) {
		out := run("stacks", address)
		// The shim's own goroutines: the diag call being served and the task service's code.
		for _, want := range []string{"goroutine ", "internal/shim.diagService.DiagStacks", "github.com/containerd/ttrpc"} {
			if !strings.Contains(out, want) {
				t.Errorf("shimdiag stacks lacks %q:\n%.3000s", want, out)
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		out := run("list", "--state-dir", state, "--namespace", harness.Namespace)
		t.Logf("shimdiag list:\n%s", out)
		want := []string{harness.Namespace, wantPid, address, id}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if slices.Equal(strings.Fields(line), want) {
				found = true
			}
		}
		if !found {
			t.Fatalf("shimdiag list lacks the line %q:\n%s", strings.Join(want, " "), out)
		}
	})

	if _, err := proc.Delete(ctx); err != nil {
		t.Errorf("delete exec dbg: %v", err)
	}
	killAndWait(ctx, t, tk)
}

// containsRun reports whether want appears in fields as consecutive elements.
func containsRun(fields, want []string) bool {
	for i := 0; i+len(want) <= len(fields); i++ {
		if slices.Equal(fields[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// buildShimdiag builds cmd/shimdiag from this checkout into a temporary folder: the harness
// builds only the three daemons, and the test must not run a stale binary.
func buildShimdiag(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "shimdiag")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/shimdiag")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/shimdiag: %v\n%s", err, out)
	}
	return bin
}
