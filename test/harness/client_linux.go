package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/platforms"
)

// WindowsImage returns image ref of client for the test images' platform (Platform), whatever
// platform the client runs on.
func WindowsImage(ctx context.Context, client *containerd.Client, ref string) (containerd.Image, error) {
	img, err := client.GetImage(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	return containerd.NewImageWithPlatform(client, img.Metadata(), platforms.Only(platforms.MustParse(Platform))), nil
}

// windowsImage is WindowsImage of ref, or of the environment's default test image when ref is
// empty.
func (e *Env) windowsImage(ctx context.Context, client *containerd.Client, ref string) (containerd.Image, error) {
	if ref == "" {
		ref = e.Image
	}
	return WindowsImage(ctx, client, ref)
}

// NewContainer creates container id with containerd's Go client, as CRI and ctr do for a
// Windows container: a Windows default spec (oci.WithDefaultSpecForPlatform, so it works the
// same against containerd 2.x and 1.7) with img's config, args replacing its command when not
// empty, then specOpts; a new snapshot of img in the wcow snapshotter; the runhcs runtime with
// runtimeOptions (a *options.Options, or nil).
func NewContainer(ctx context.Context, client *containerd.Client, id string, img containerd.Image, args []string, specOpts []oci.SpecOpts, runtimeOptions any) (containerd.Container, error) {
	opts := []oci.SpecOpts{oci.WithDefaultSpecForPlatform(Platform)}
	if len(args) > 0 {
		opts = append(opts, oci.WithImageConfigArgs(img, args))
	} else {
		opts = append(opts, oci.WithImageConfig(img))
	}
	opts = append(opts, specOpts...)
	c, err := client.NewContainer(ctx, id,
		containerd.WithImage(img),
		containerd.WithSnapshotter(Snapshotter),
		containerd.WithNewSnapshot(id+"-rootfs", img),
		containerd.WithRuntime(Runtime, runtimeOptions),
		containerd.WithNewSpec(opts...),
	)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", id, err)
	}
	return c, nil
}

// ClientRun describes a container RunWithClient creates.
type ClientRun struct {
	ID string
	// Image is a reference; empty means the default test image.
	Image string
	// Args replace the image's command; empty runs its default.
	Args []string
	// Stdin, if set, is the container's stdin.
	Stdin io.Reader
	// SpecOpts are applied after the Windows default spec and the image config.
	SpecOpts []oci.SpecOpts
	// RuntimeOptions are the shim's runtime options (a *options.Options), or nil.
	RuntimeOptions any
	// Timeout bounds the run; 0 means 2 minutes.
	Timeout time.Duration
}

// RunWithClient creates, starts, waits for and deletes a container with containerd's Go client,
// the way CRI and ctr do, with a Windows spec (oci.WithDefaultSpecForPlatform) so it works the
// same against containerd 2.x and 1.7. The container and its snapshot are removed afterwards.
func (e *Env) RunWithClient(ctx context.Context, t testing.TB, r ClientRun) (RunResult, error) {
	t.Helper()
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(Context(ctx), timeout)
	defer cancel()
	client := e.Client(t)
	img, err := e.windowsImage(ctx, client, r.Image)
	if err != nil {
		return RunResult{}, err
	}
	c, err := NewContainer(ctx, client, r.ID, img, r.Args, r.SpecOpts, r.RuntimeOptions)
	if err != nil {
		return RunResult{}, err
	}
	defer func() {
		// A fresh context: the run's may have expired, and the container must still go.
		dctx, dcancel := context.WithTimeout(Context(context.Background()), 30*time.Second)
		defer dcancel()
		if err := c.Delete(dctx, containerd.WithSnapshotCleanup); err != nil {
			t.Errorf("delete container %s: %v", r.ID, err)
		}
	}()

	var stdout, stderr bytes.Buffer
	creator := cio.NewCreator(cio.WithStreams(r.Stdin, &stdout, &stderr), cio.WithFIFODir(filepath.Join(e.Root, "fifo")))
	task, err := c.NewTask(ctx, creator)
	if err != nil {
		return RunResult{}, fmt.Errorf("create task %s: %w", r.ID, err)
	}
	status, err := task.Wait(ctx)
	if err != nil {
		_, _ = task.Delete(ctx, containerd.WithProcessKill)
		return RunResult{}, fmt.Errorf("wait task %s: %w", r.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(ctx, containerd.WithProcessKill)
		return RunResult{}, fmt.Errorf("start task %s: %w", r.ID, err)
	}
	var exit containerd.ExitStatus
	select {
	case exit = <-status:
	case <-ctx.Done():
		_, _ = task.Delete(Context(context.Background()), containerd.WithProcessKill)
		return RunResult{Stdout: stdout.String(), Stderr: stderr.String()}, fmt.Errorf("task %s did not exit in %v", r.ID, timeout)
	}
	// Delete waits for the stdio copy to finish, so the buffers are complete after it.
	if _, err := task.Delete(ctx); err != nil {
		return RunResult{}, fmt.Errorf("delete task %s: %w", r.ID, err)
	}
	code, _, err := exit.Result()
	if err != nil {
		return RunResult{}, fmt.Errorf("task %s exit status: %w", r.ID, err)
	}
	return RunResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: int(code)}, nil
}
