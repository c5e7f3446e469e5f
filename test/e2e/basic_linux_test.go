package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// runner runs the test image with a command (none: the image's default) and returns what the
// container printed and its exit code.
type runner struct {
	name string
	run  func(ctx context.Context, t *testing.T, id string, stdin []byte, args ...string) (harness.RunResult, error)
}

func runners(env *harness.Env) []runner {
	return []runner{
		{"ctr", func(ctx context.Context, t *testing.T, id string, stdin []byte, args ...string) (harness.RunResult, error) {
			return env.CtrRunInput(ctx, stdin, id, "", nil, args...)
		}},
		{"client", func(ctx context.Context, t *testing.T, id string, stdin []byte, args ...string) (harness.RunResult, error) {
			r := harness.ClientRun{ID: id, Args: args}
			if stdin != nil {
				r.Stdin = bytes.NewReader(stdin)
			}
			return env.RunWithClient(ctx, t, r)
		}},
	}
}

// TestBasic runs the test image with ctr and with containerd's Go client: its default command,
// exit codes, stderr, stdin and PATH lookup.
func TestBasic(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n := 0
	id := func() string { n++; return fmt.Sprintf("basic-%d", n) }

	t.Run("image unpacked into the wcow snapshotter", func(t *testing.T) {
		client := env.Client(t)
		cctx := harness.Context(ctx)
		img, err := harness.WindowsImage(cctx, client, env.Image)
		if err != nil {
			t.Fatal(err)
		}
		unpacked, err := img.IsUnpacked(cctx, harness.Snapshotter)
		if err != nil || !unpacked {
			t.Fatalf("IsUnpacked(%s) = %v, %v; want true", harness.Snapshotter, unpacked, err)
		}
		spec, err := img.Spec(cctx)
		if err != nil {
			t.Fatal(err)
		}
		if spec.OS != "windows" || spec.OSVersion != image.DefaultOSVersion {
			t.Fatalf("image platform %s %s, want windows %s", spec.OS, spec.OSVersion, image.DefaultOSVersion)
		}
	})

	for _, r := range runners(env) {
		t.Run(r.name, func(t *testing.T) {
			t.Run("default command", func(t *testing.T) {
				res, err := r.run(ctx, t, id(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != 0 {
					t.Fatalf("exit code %d, want 0; stderr: %s", res.ExitCode, res.Stderr)
				}
				if got := strings.TrimRight(res.Stdout, "\r\n"); got != image.DefaultOutput {
					t.Fatalf("stdout = %q, want %q", res.Stdout, image.DefaultOutput)
				}
			})

			t.Run("exit codes", func(t *testing.T) {
				for _, code := range []int{0, 1, 3, 42, 255} {
					t.Run(fmt.Sprint(code), func(t *testing.T) {
						res, err := r.run(ctx, t, id(), nil, image.WorkloadPath, "exit", fmt.Sprint(code))
						if err != nil {
							t.Fatal(err)
						}
						if res.ExitCode != code {
							t.Fatalf("exit code %d, want %d; stderr: %s", res.ExitCode, code, res.Stderr)
						}
					})
				}
			})

			t.Run("stderr", func(t *testing.T) {
				res, err := r.run(ctx, t, id(), nil, image.WorkloadPath, "stderr", "to", "stderr")
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != 0 {
					t.Fatalf("exit code %d, want 0; stderr: %s", res.ExitCode, res.Stderr)
				}
				if strings.TrimRight(res.Stderr, "\r\n") != "to stderr" {
					t.Errorf("stderr = %q, want %q", res.Stderr, "to stderr")
				}
				if res.Stdout != "" {
					t.Errorf("stdout = %q, want nothing", res.Stdout)
				}
			})

			t.Run("stdin", func(t *testing.T) {
				in := "first line\nsecond line\n"
				res, err := r.run(ctx, t, id(), []byte(in), image.WorkloadPath, "cat")
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != 0 || res.Stdout != in {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %q", res.ExitCode, res.Stdout, res.Stderr, in)
				}
			})

			t.Run("command found on PATH", func(t *testing.T) {
				res, err := r.run(ctx, t, id(), nil, "workload", "echo", "via", "PATH")
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != 0 || strings.TrimRight(res.Stdout, "\r\n") != "via PATH" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %q", res.ExitCode, res.Stdout, res.Stderr, "via PATH")
				}
			})
		})
	}

	t.Run("no containers left", func(t *testing.T) {
		out, stderr, err := env.Ctr(ctx, "containers", "list", "--quiet")
		if err != nil {
			t.Fatalf("ctr containers list: %v: %s", err, stderr)
		}
		if strings.TrimSpace(out) != "" {
			t.Fatalf("containers left after the runs: %q", out)
		}
	})
}
