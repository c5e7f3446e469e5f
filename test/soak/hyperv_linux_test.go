package soak

// The Hyper-V steps: pods as CRI makes them (a sandbox task that is the utility VM <pod>@vm,
// then workload containers naming it by io.kubernetes.cri.sandbox-id), churned, their VM
// crashed, their shim killed; each step ends with nothing left (Env.Residue).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// hvOptions are the runtime options of every task of a Hyper-V pod.
var hvOptions = &options.Options{SandboxIsolation: options.Options_HYPERVISOR}

// CRI's annotations that put a container in a pod (containerd's internal/cri/annotations).
const (
	annotationSandboxID     = "io.kubernetes.cri.sandbox-id"
	annotationContainerType = "io.kubernetes.cri.container-type"
)

// hvPod is a Hyper-V pod's sandbox: its task is the VM (pid 0).
type hvPod struct {
	id   string
	c    containerd.Container
	task containerd.Task
	exit <-chan containerd.ExitStatus
}

// hvImage imports, once, an image whose base layer has the utility VM's boot files (a "pause"
// image a Hyper-V sandbox can boot from) and returns it; its workload runs in the pod's
// containers too.
func (s *soak) hvImage(ctx context.Context) (containerd.Image, error) {
	s.mu.Lock()
	img := s.hvImg
	s.mu.Unlock()
	if img != nil {
		return img, nil
	}
	def, wl, err := harness.TestImage("docker.io/runhcs/soak-hyperv-pause:latest")
	if err != nil {
		return nil, err
	}
	def.Layers = []image.Layer{image.BaseLayer(wl, image.BaseOptions{UtilityVM: true})}
	if err := s.env.ImportTestImage(ctx, def); err != nil {
		return nil, err
	}
	client, _, err := s.cl(ctx)
	if err != nil {
		return nil, err
	}
	if img, err = harness.WindowsImage(ctx, client, def.Name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.hvImg = img
	s.mu.Unlock()
	return img, nil
}

// hvContainer creates container id of pod (kind "sandbox" or "container"), without a task;
// args nil runs the image's command.
func (s *soak) hvContainer(ctx context.Context, pod, id, kind string, args []string) (containerd.Container, error) {
	img, err := s.hvImage(ctx)
	if err != nil {
		return nil, err
	}
	client, _, err := s.cl(ctx)
	if err != nil {
		return nil, err
	}
	return harness.NewContainer(ctx, client, id, img, args,
		[]oci.SpecOpts{oci.WithAnnotations(map[string]string{annotationSandboxID: pod, annotationContainerType: kind})}, hvOptions)
}

// startPod creates and starts the sandbox of pod: its VM runs when this returns.
func (s *soak) startPod(ctx context.Context, pod string) (*hvPod, error) {
	c, err := s.hvContainer(ctx, pod, pod, "sandbox", nil)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", pod, err)
	}
	p := &hvPod{id: pod, c: c}
	if p.task, err = c.NewTask(ctx, cio.NullIO); err != nil {
		return p, fmt.Errorf("create sandbox task %s: %w", pod, err)
	}
	if p.exit, err = p.task.Wait(ctx); err != nil {
		return p, fmt.Errorf("wait sandbox task %s: %w", pod, err)
	}
	if err := p.task.Start(ctx); err != nil {
		return p, fmt.Errorf("start sandbox task %s: %w", pod, err)
	}
	if pid := p.task.Pid(); pid != 0 {
		return p, fmt.Errorf("sandbox task %s has pid %d: it is the VM, not a process", pod, pid)
	}
	return p, nil
}

// startIn starts container id in pod running `workload wait-signal 7`.
func (s *soak) startIn(ctx context.Context, pod, id string) (*running, error) {
	c, err := s.hvContainer(ctx, pod, id, "container", workload("wait-signal", "7"))
	if err != nil {
		return nil, fmt.Errorf("create container %s in pod %s: %w", id, pod, err)
	}
	return s.startTask(ctx, c)
}

// stopPod stops the sandbox as CRI does (Kill: containerd's Delete(WithProcessKill) skips a task
// of pid 0, containerd#10441) and deletes task and container.
func (s *soak) stopPod(ctx context.Context, p *hvPod) error {
	if err := p.task.Kill(ctx, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill sandbox %s: %w", p.id, err)
	}
	if _, err := harness.ExitCode(p.exit, time.Minute); err != nil {
		return fmt.Errorf("sandbox %s: %w", p.id, err)
	}
	if _, err := p.task.Delete(ctx); err != nil {
		return fmt.Errorf("delete sandbox task %s: %w", p.id, err)
	}
	if err := p.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", p.id, err)
	}
	return nil
}

// removePod deletes the containers ids of pod and then its sandbox, whatever their state: the
// cleanup after a failed step. The sandbox's task is killed first (see stopPod).
func (s *soak) removePod(pod string, ids ...string) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.remove(id))
	}
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 2*hcsTimeout+30*time.Second)
	defer cancel()
	if client, _, err := s.cl(ctx); err != nil {
		errs = append(errs, err)
	} else if c, err := client.LoadContainer(ctx, pod); err == nil {
		if tk, err := c.Task(ctx, nil); err == nil {
			if st, err := tk.Wait(ctx); err == nil {
				if err := tk.Kill(ctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("kill sandbox %s: %w", pod, err))
				}
				_, _ = harness.ExitCode(st, time.Minute)
			}
		}
	}
	errs = append(errs, s.remove(pod))
	return errors.Join(errs...)
}

// hvCycle is one pod's life: sandbox, a container that prints a line, an exec in it (output
// checked), SIGTERM (exit 7 and its output checked), and the deletes.
func (s *soak) hvCycle(ctx context.Context, pod string) error {
	c := pod + "-c"
	p, err := s.startPod(ctx, pod)
	if err == nil {
		var r *running
		if r, err = s.startIn(ctx, pod, c); err == nil {
			if err = s.exec(ctx, r, "echo", "pod "+pod); err == nil {
				if err = s.stop(ctx, r); err == nil {
					err = s.stopPod(ctx, p)
				}
			}
		}
	}
	if err != nil {
		// One shim serves a pod; which ones there were says whether a task reached another.
		err = fmt.Errorf("%w (shims started for %s: %v, for %s: %v)", err, pod, s.env.ShimPids(pod), c, s.env.ShimPids(c))
		if rerr := s.removePod(pod, c); rerr != nil {
			err = fmt.Errorf("%w; cleanup: %v", err, rerr)
		}
	}
	return err
}

// hvChurn runs cfg.hvPods pod cycles, cfg.hvParallel at a time. Before, with one pod running,
// it checks that Residue sees what a VM holds, or the check after could not fail.
func (s *soak) hvChurn(ctx context.Context, t *testing.T) {
	p, err := s.startPod(ctx, "hv-probe")
	if err != nil {
		_ = s.removePod("hv-probe")
		t.Fatal(err)
	}
	held := strings.Join(s.env.Residue(ctx), "\n")
	for _, want := range []string{"compute system hv-probe@vm", "VM init process ", "network namespace " + filepath.Join(layout.NetnsDir(s.env.HCSEmuRoot()), layout.VMNetnsPrefix), "cgroup ", "shim process "} {
		if !strings.Contains(held, want) {
			t.Errorf("with a Hyper-V pod running, Residue does not list a %q: %s", want, held)
		}
	}
	if err := s.stopPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.checkClean(ctx, t, "the probe pod")

	start := time.Now()
	errs := harness.Churn(s.cfg.hvPods, s.cfg.hvParallel, func(i int) error { return s.hvCycle(ctx, fmt.Sprintf("hv-churn-%d", i)) })
	if len(errs) > 0 {
		t.Fatalf("Hyper-V churn: %d pods failed; first: %v", len(errs), errs[0])
	}
	t.Logf("soak: Hyper-V churn: %d pods, %d at a time, in %v", s.cfg.hvPods, s.cfg.hvParallel, time.Since(start).Round(time.Millisecond))
	s.checkClean(ctx, t, "Hyper-V churn")
}

// watchExits watches the TaskExit and TaskDelete events of the suite's client from now on.
func (s *soak) watchExits(ctx context.Context, t *testing.T) *harness.TaskEvents {
	t.Helper()
	client, _, err := s.cl(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return harness.WatchTaskEvents(ctx, t, client)
}

// hvPodWithTwo starts pod with two workload containers running in it.
func (s *soak) hvPodWithTwo(ctx context.Context, pod string) (*hvPod, []*running, error) {
	p, err := s.startPod(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	var rs []*running
	for _, id := range []string{pod + "-a", pod + "-b"} {
		r, err := s.startIn(ctx, pod, id)
		if err != nil {
			return p, rs, err
		}
		rs = append(rs, r)
	}
	return p, rs, nil
}

// vmCrashes crashes a pod's VM (hcsemu's UnexpectedExit of <pod>@vm) cfg.vmCrashes times, each
// with two containers running in it: each of the three tasks exits once, all delete, nothing
// is left.
func (s *soak) vmCrashes(ctx context.Context, t *testing.T) {
	f := s.faultClient(t)
	ev := s.watchExits(ctx, t)
	start := time.Now()
	for i := 0; i < s.cfg.vmCrashes; i++ {
		if err := s.vmCrash(ctx, f, ev, fmt.Sprintf("hv-crash-%d", i)); err != nil {
			t.Fatalf("VM crash %d: %v", i, err)
		}
		s.checkClean(ctx, t, fmt.Sprintf("VM crash %d", i))
	}
	t.Logf("soak: VM crashes: %d, each of a pod with 2 containers (3 tasks, one TaskExit each), in %v", s.cfg.vmCrashes, time.Since(start).Round(time.Millisecond))
}

func (s *soak) vmCrash(ctx context.Context, f *emuclient.Fault, ev *harness.TaskEvents, pod string) (err error) {
	defer func() {
		if err != nil {
			if rerr := s.removePod(pod, pod+"-a", pod+"-b"); rerr != nil {
				err = fmt.Errorf("%w; cleanup: %v", err, rerr)
			}
		}
	}()
	p, rs, err := s.hvPodWithTwo(ctx, pod)
	if err != nil {
		return err
	}
	if _, err := f.Crash(pod + "@vm"); err != nil {
		return fmt.Errorf("crash %s@vm: %w", pod, err)
	}
	if _, err := harness.ExitCode(p.exit, time.Minute); err != nil {
		return fmt.Errorf("sandbox %s after its VM crashed: %w", pod, err)
	}
	for _, r := range rs {
		if _, err := harness.ExitCode(r.exit, time.Minute); err != nil {
			return fmt.Errorf("container %s after its VM crashed: %w", r.c.ID(), err)
		}
	}
	ids := []string{pod}
	for _, r := range rs {
		if _, err := r.task.Delete(ctx); err != nil {
			return fmt.Errorf("delete task %s: %w", r.c.ID(), err)
		}
		if err := r.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			return fmt.Errorf("delete container %s: %w", r.c.ID(), err)
		}
		ids = append(ids, r.c.ID())
	}
	if _, err := p.task.Delete(ctx); err != nil {
		return fmt.Errorf("delete sandbox task %s: %w", pod, err)
	}
	if err := p.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", pod, err)
	}
	return ev.CheckDeleted(ids, time.Minute)
}

// hvShimKills SIGKILLs a Hyper-V pod's shim cfg.hvKills times, each while two containers run in
// its VM: every task ends, and containerd's cleanup after the dead shim (its delete action)
// leaves nothing, the VM included, before the test deletes the containers' records.
func (s *soak) hvShimKills(ctx context.Context, t *testing.T) {
	ev := s.watchExits(ctx, t)
	start := time.Now()
	for i := 0; i < s.cfg.hvKills; i++ {
		pod := fmt.Sprintf("hv-kill-%d", i)
		if err := s.hvShimKill(ctx, t, ev, pod); err != nil {
			_ = s.removePod(pod, pod+"-a", pod+"-b")
			t.Fatalf("Hyper-V shim kill %d: %v", i, err)
		}
	}
	t.Logf("soak: Hyper-V shim kills: %d, each of a pod with 2 containers running, in %v", s.cfg.hvKills, time.Since(start).Round(time.Millisecond))
}

func (s *soak) hvShimKill(ctx context.Context, t *testing.T, ev *harness.TaskEvents, pod string) error {
	p, rs, err := s.hvPodWithTwo(ctx, pod)
	if err != nil {
		return err
	}
	pid, err := s.shimPid(pod, nil)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill shim %d: %w", pid, err)
	}
	// containerd's Wait ends with the shim's connection (an error or an exit status); what
	// matters is that it ends, and what containerd's cleanup leaves.
	for _, ch := range []<-chan containerd.ExitStatus{p.exit, rs[0].exit, rs[1].exit} {
		if _, err := harness.ExitCode(ch, time.Minute); err != nil && strings.Contains(err.Error(), "no exit within") {
			return err
		}
	}
	if left := s.env.WaitNoResidue(ctx, 30*time.Second); len(left) > 0 {
		return fmt.Errorf("after containerd's cleanup of the dead shim %d, left behind: %q", pid, left)
	}
	// containerd publishes a TaskExit of each task of the dead shim (its cleanup after a dead
	// shim); none may be lost, none doubled.
	if err := ev.CheckExited([]string{pod, pod + "-a", pod + "-b"}, time.Minute); err != nil {
		return err
	}
	client, _, err := s.cl(ctx)
	if err != nil {
		return err
	}
	for _, id := range []string{pod, pod + "-a", pod + "-b"} {
		c, err := client.LoadContainer(ctx, id)
		if err != nil {
			return err
		}
		if _, err := c.Task(ctx, nil); !errdefs.IsNotFound(err) {
			return fmt.Errorf("task %s after its shim died and containerd cleaned up: %v, want not found", id, err)
		}
		if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			return fmt.Errorf("delete container %s: %w", id, err)
		}
	}
	s.checkClean(ctx, t, "the records of the pod whose shim was killed were deleted")
	return nil
}
