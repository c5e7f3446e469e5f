package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// BenchmarkHyperVPod measures, under the emulator, a pod's start to its first output: its sandbox
// task started (for a Hyper-V pod, its utility VM created and booted through the shim, internal/uvm
// and hcsemu; for a process-isolated pod, its pause container), then a container of the pod created
// and started, to the first byte of its stdout — a Hyper-V pod beside a process-isolated one,
// interleaved A/B for b.N rounds (run with -benchtime=30x or more), with the resident memory of the
// emulated VM's init process; it prints p50 and p90. These are emulator figures: a VM here is
// namespaces and a cgroup, not Hyper-V (kata-containers gates its CI at about 0.71 s to the
// workload; a Windows utility VM takes seconds, docs/notes/hyperv.md §6, §7).
func BenchmarkHyperVPod(b *testing.B) {
	harness.RequireRoot(b)
	env := harness.Start(b, harness.Options{Containerd: "2"})
	ctx := harness.Context(context.Background())
	client := env.Client(b)
	img, err := harness.WindowsImage(ctx, client, env.Image)
	if err != nil {
		b.Fatal(err)
	}
	fifo := filepath.Join(env.Root, "fifo")

	// start creates and starts container id of pod, and returns its task, a channel of its
	// exit and a channel closed at its first output.
	start := func(ctx context.Context, pod, id, kind string, ropts any, args ...string) (containerd.Task, <-chan containerd.ExitStatus, <-chan struct{}, error) {
		c, err := harness.NewContainer(ctx, client, id, img, append([]string{image.WorkloadPath}, args...),
			[]oci.SpecOpts{oci.WithAnnotations(map[string]string{"io.kubernetes.cri.sandbox-id": pod, "io.kubernetes.cri.container-type": kind})}, ropts)
		if err != nil {
			return nil, nil, nil, err
		}
		out := &firstWrite{seen: make(chan struct{})}
		task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(fifo)))
		if err != nil {
			return nil, nil, nil, err
		}
		exit, err := task.Wait(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := task.Start(ctx); err != nil {
			return nil, nil, nil, err
		}
		return task, exit, out.seen, nil
	}
	// stop kills (a Hyper-V sandbox has pid 0, which containerd's WithProcessKill skips),
	// waits for and deletes a task and its container.
	stop := func(ctx context.Context, task containerd.Task, exit <-chan containerd.ExitStatus) error {
		if err := task.Kill(ctx, 9); err != nil && !strings.Contains(err.Error(), "not found") {
			return err
		}
		<-exit
		if _, err := task.Delete(ctx); err != nil {
			return err
		}
		c, err := client.LoadContainer(ctx, task.ID())
		if err != nil {
			return err
		}
		return c.Delete(ctx, containerd.WithSnapshotCleanup)
	}
	// pod starts a pod (Hyper-V with hv) to its container's first output, and returns how long
	// that took and, for Hyper-V, the VM init's RSS (KiB); then removes the pod.
	pod := func(name string, hv bool) (time.Duration, int64, error) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		var ropts any
		if hv {
			ropts = &options.Options{SandboxIsolation: options.Options_HYPERVISOR}
		}
		t0 := time.Now()
		sb, sbExit, _, err := start(ctx, name, name, "sandbox", ropts, "sleep", "600")
		if err != nil {
			return 0, 0, fmt.Errorf("sandbox: %w", err)
		}
		defer stop(context.WithoutCancel(ctx), sb, sbExit)
		ctr, ctrExit, first, err := start(ctx, name, name+"-c", "container", ropts, "echo", "x")
		if err != nil {
			return 0, 0, fmt.Errorf("container: %w", err)
		}
		select {
		case <-first:
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("no output: %w", ctx.Err())
		}
		d := time.Since(t0)
		var rss int64
		if hv {
			if rss, err = vmInitRSS(env); err != nil {
				return 0, 0, err
			}
		}
		// A fast failure must not be measured as a fast start: the container must have run.
		st := <-ctrExit
		if code, _, err := st.Result(); err != nil || code != 0 {
			return 0, 0, fmt.Errorf("container exited %d (%v)", code, err)
		}
		if _, err := ctr.Delete(ctx); err != nil {
			return 0, 0, err
		}
		c, err := client.LoadContainer(ctx, ctr.ID())
		if err != nil {
			return 0, 0, err
		}
		if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			return 0, 0, err
		}
		return d, rss, nil
	}
	var hvStart, procStart []time.Duration
	var rss []int64
	for i := range b.N + 1 { // round 0 warms up and is not counted
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, hv := range order {
			d, r, err := pod(fmt.Sprintf("bench-pod-%d-%t", i, hv), hv)
			if err != nil {
				b.Fatalf("round %d, Hyper-V %t: %v", i, hv, err)
			}
			if i == 0 {
				continue
			}
			if hv {
				hvStart, rss = append(hvStart, d), append(rss, r)
			} else {
				procStart = append(procStart, d)
			}
		}
	}
	fmt.Fprintf(os.Stdout, "\npod start → first output of its container, %d rounds (emulator figures)\n", b.N)
	fmt.Fprintf(os.Stdout, "  %-28s p50 %7.1f ms  p90 %7.1f ms\n", "Hyper-V (utility VM)", msOf(percentile(hvStart, 50)), msOf(percentile(hvStart, 90)))
	fmt.Fprintf(os.Stdout, "  %-28s p50 %7.1f ms  p90 %7.1f ms\n", "process isolation", msOf(percentile(procStart, 50)), msOf(percentile(procStart, 90)))
	fmt.Fprintf(os.Stdout, "  %-28s p50 %7.1f MiB p90 %7.1f MiB\n", "VM init RSS", mibOf(percentile(rss, 50)), mibOf(percentile(rss, 90)))
	b.ReportMetric(msOf(percentile(hvStart, 50)), "hv-ms-p50")
	b.ReportMetric(msOf(percentile(procStart, 50)), "proc-ms-p50")
}

// firstWrite is a stdout that closes seen at the first byte written to it.
type firstWrite struct {
	once sync.Once
	seen chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.seen) })
	}
	return len(p), nil
}

// vmInitRSS is the VmRSS (KiB) of the one utility VM init that the environment's hcsemu runs.
func vmInitRSS(env *harness.Env) (int64, error) {
	inits := env.VMInitProcesses()
	if len(inits) != 1 {
		return 0, fmt.Errorf("VM inits of the hcsemu under %s: %v, want 1", env.Root, inits)
	}
	return vmRSS(inits[0])
}
