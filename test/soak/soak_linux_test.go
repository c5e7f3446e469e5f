package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// config is the size of a run: the CI variant by default, the counts with
// RUNHCS_SOAK=long.
type config struct {
	long              bool
	cycles            int // churn: create/start/exec/kill/delete cycles
	parallel          int // churn: cycles at a time
	kills             int // shim SIGKILLs
	containerdRestart int // containerd restarts with tasks running
	hcsemuRestarts    int // hcsemu restarts with containers running
	hvPods            int // Hyper-V churn: pods (a VM and a container each) made and deleted
	hvParallel        int // Hyper-V churn: pods at a time
	vmCrashes         int // VM crashes of a pod with two containers
	hvKills           int // SIGKILLs of a Hyper-V pod's shim with two containers running
	seed              int64
}

func loadConfig(t *testing.T) config {
	c := config{parallel: 8, cycles: 160, kills: 12, containerdRestart: 5, hcsemuRestarts: 2, hvPods: 60, hvParallel: 4, vmCrashes: 5, hvKills: 5}
	switch v := os.Getenv("RUNHCS_SOAK"); v {
	case "", "ci":
	case "long":
		c = config{long: true, parallel: 8, cycles: 500, kills: 100, containerdRestart: 20, hcsemuRestarts: 5, hvPods: 500, hvParallel: 4, vmCrashes: 20, hvKills: 20}
	default:
		t.Fatalf("RUNHCS_SOAK=%q: want ci (the default) or long", v)
	}
	c.seed = time.Now().UnixNano()
	if v := os.Getenv("RUNHCS_SOAK_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("RUNHCS_SOAK_SEED=%q: %v", v, err)
		}
		c.seed = n
	}
	return c
}

// hcsTimeout is the shims' HCS timeout in this suite (HCSSHIM_TIMEOUT_SECONDS): short enough
// that a stalled call fails within the step, long enough for any real call on a loaded machine
// (the slowest, create and start of a compute system, take well under a second in hcsemu).
const hcsTimeout = 15 * time.Second

// Tolerances of the long-lived daemons' growth across a run. A daemon's count right after
// warm-up is the baseline; a leak of one fd or goroutine per cycle or per kill exceeds these
// at once (160 cycles and 12 kills in CI).
const (
	fdTolerance        = 16
	goroutineTolerance = 30
)

// soak is one run: the environment, a client and the random source.
type soak struct {
	env *harness.Env
	cfg config
	rng *rand.Rand

	mu     sync.Mutex
	client *containerd.Client
	img    containerd.Image
	hvImg  containerd.Image // the Hyper-V steps' image, imported by the first of them
}

// TestSoak runs the steps in order on one environment. Each step ends by checking that
// nothing is left; the daemons' file descriptors and goroutines are compared with their
// baseline after the steps that keep them running.
func TestSoak(t *testing.T) {
	cfg := loadConfig(t)
	t.Logf("soak: %s variant, seed %d (RUNHCS_SOAK_SEED=%d repeats the run), containerd %s",
		map[bool]string{false: "CI", true: "long"}[cfg.long], cfg.seed, cfg.seed, harness.ContainerdVersion())
	env := harness.Start(t, harness.Options{
		ContainerdEnv: []string{fmt.Sprintf("%s=%d", task.TimeoutEnv, int(hcsTimeout/time.Second))},
	})
	s := &soak{env: env, cfg: cfg, rng: rand.New(rand.NewSource(cfg.seed))}
	t.Cleanup(s.closeClient)
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 3*time.Hour)
	defer cancel()

	// Warm-up: one cycle, so what the daemons make once (connections, caches) is in the baseline;
	// on the way, the check of what is left must see what a running container holds, or it
	// could not fail.
	r, err := s.start(ctx, "warmup")
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	held := strings.Join(s.env.Residue(ctx), "\n")
	for _, want := range []string{"compute system warmup", "mount ", "cgroup ", "shim process", "bundle "} {
		if !strings.Contains(held, want) {
			t.Errorf("with a container running, Residue does not list a %q: %s", want, held)
		}
	}
	if err := s.exec(ctx, r, "echo", "warm"); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(ctx, r); err != nil {
		t.Fatal(err)
	}
	s.checkClean(ctx, t, "warm-up")
	base := s.stats(ctx, t, "baseline")

	ok := t.Run("churn", func(t *testing.T) { s.churn(ctx, t) }) &&
		t.Run("shim kills", func(t *testing.T) { s.shimKills(ctx, t) }) &&
		t.Run("stuck HCS", func(t *testing.T) { s.stuck(ctx, t) }) &&
		t.Run("injected failures", func(t *testing.T) { s.failures(ctx, t) }) &&
		t.Run("Hyper-V churn", func(t *testing.T) { s.hvChurn(ctx, t) }) &&
		t.Run("VM crashes", func(t *testing.T) { s.vmCrashes(ctx, t) }) &&
		t.Run("Hyper-V shim kills", func(t *testing.T) { s.hvShimKills(ctx, t) })
	if !ok {
		return
	}
	after := s.stats(ctx, t, "after churn, kills, stalls, failures and the Hyper-V steps")
	for _, name := range []string{harness.DaemonHCSEmu, harness.DaemonSnapshotter, harness.DaemonContainerd} {
		checkGrowth(t, name, base[name], after[name])
	}

	ok = t.Run("containerd restarts", func(t *testing.T) { s.containerdRestarts(ctx, t) }) &&
		t.Run("hcsemu restarts", func(t *testing.T) { s.hcsemuRestarts(ctx, t) })
	if !ok {
		return
	}
	// The snapshotter ran through everything; the others were restarted (their counts after a
	// restart are not comparable with the baseline).
	end := s.stats(ctx, t, "end")
	checkGrowth(t, harness.DaemonSnapshotter, base[harness.DaemonSnapshotter], end[harness.DaemonSnapshotter])
}

// stats logs and returns the daemons' resource counts.
func (s *soak) stats(ctx context.Context, t *testing.T, when string) map[string]harness.DaemonStat {
	t.Helper()
	st, err := s.env.DaemonStats(ctx)
	if err != nil {
		t.Fatalf("daemon stats %s: %v", when, err)
	}
	for _, name := range []string{harness.DaemonHCSEmu, harness.DaemonSnapshotter, harness.DaemonContainerd} {
		t.Logf("soak: %s: %s: %v", when, name, st[name])
	}
	return st
}

// checkGrowth fails t if a daemon grew beyond the tolerances. Threads are logged, not checked:
// the Go runtime keeps the threads a busy moment made, which is no leak.
func checkGrowth(t *testing.T, name string, before, after harness.DaemonStat) {
	t.Helper()
	if before.Pid != after.Pid {
		t.Errorf("%s: pid %d became %d: it was restarted or died", name, before.Pid, after.Pid)
		return
	}
	if after.FDs > before.FDs+fdTolerance {
		t.Errorf("%s: %d file descriptors after the steps, %d before: more than %d more", name, after.FDs, before.FDs, fdTolerance)
	}
	if before.Goroutines >= 0 && after.Goroutines > before.Goroutines+goroutineTolerance {
		t.Errorf("%s: %d goroutines after the steps, %d before: more than %d more", name, after.Goroutines, before.Goroutines, goroutineTolerance)
	}
}

// checkClean fails t with what is left if the environment holds anything beyond its idle state
// (waiting a while: containerd cleans up after a dead shim in the background).
func (s *soak) checkClean(ctx context.Context, t *testing.T, after string) {
	t.Helper()
	if left := s.env.WaitNoResidue(ctx, 30*time.Second); len(left) > 0 {
		t.Fatalf("after %s, left behind: %q", after, left)
	}
}

// cl returns the suite's containerd client, dialing anew after closeClient (containerd restarts).
func (s *soak) cl(ctx context.Context) (*containerd.Client, containerd.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, s.img, nil
	}
	c, err := containerd.New(s.env.Address, containerd.WithDefaultNamespace(harness.Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, nil, err
	}
	img, err := harness.WindowsImage(ctx, c, s.env.Image)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	s.client, s.img = c, img
	return s.client, s.img, nil
}

func (s *soak) closeClient() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
		s.hvImg = nil
	}
}

// workload is the test image's workload command line with args.
func workload(args ...string) []string { return append([]string{image.WorkloadPath}, args...) }

// running is a container with a started task whose init process is `workload wait-signal 7`:
// it prints "waiting", and on SIGTERM "got SIGTERM", and exits 7.
type running struct {
	c      containerd.Container
	task   containerd.Task
	exit   <-chan containerd.ExitStatus
	stdout *harness.SyncBuffer
}

// newContainer creates container id running args, without a task.
func (s *soak) newContainer(ctx context.Context, id string, args ...string) (containerd.Container, error) {
	client, img, err := s.cl(ctx)
	if err != nil {
		return nil, err
	}
	return harness.NewContainer(ctx, client, id, img, args, nil, nil)
}

func (s *soak) fifoDir() string { return filepath.Join(s.env.Root, "fifo") }

// start creates container id with a started wait-signal task, waiting until it says "waiting".
func (s *soak) start(ctx context.Context, id string) (*running, error) {
	c, err := s.newContainer(ctx, id, workload("wait-signal", "7")...)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", id, err)
	}
	return s.startTask(ctx, c)
}

// startTask creates and starts the task of c, whose init process is `workload wait-signal 7`,
// waiting until it says "waiting".
func (s *soak) startTask(ctx context.Context, c containerd.Container) (*running, error) {
	id := c.ID()
	r := &running{c: c, stdout: &harness.SyncBuffer{}}
	tk, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, r.stdout, r.stdout), cio.WithFIFODir(s.fifoDir())))
	if err != nil {
		return r, fmt.Errorf("create task %s: %w", id, err)
	}
	r.task = tk
	if r.exit, err = tk.Wait(ctx); err != nil {
		return r, fmt.Errorf("wait task %s: %w", id, err)
	}
	if err := tk.Start(ctx); err != nil {
		return r, fmt.Errorf("start task %s: %w", id, err)
	}
	if err := r.stdout.WaitFor("waiting\n", time.Minute); err != nil {
		return r, fmt.Errorf("task %s: %w", id, err)
	}
	return r, nil
}

// exec runs `workload echo token` in the task and checks its output and exit code.
func (s *soak) exec(ctx context.Context, r *running, execID, token string) error {
	spec, err := r.c.Spec(ctx)
	if err != nil {
		return err
	}
	ps := *spec.Process
	ps.Args, ps.CommandLine, ps.Terminal = workload("echo", token), "", false
	out := &harness.SyncBuffer{}
	p, err := r.task.Exec(ctx, execID, &ps, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(s.fifoDir())))
	if err != nil {
		return fmt.Errorf("exec %s in %s: %w", execID, r.c.ID(), err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return fmt.Errorf("wait exec %s: %w", execID, err)
	}
	if err := p.Start(ctx); err != nil {
		_, _ = p.Delete(ctx, containerd.WithProcessKill)
		return fmt.Errorf("start exec %s in %s: %w", execID, r.c.ID(), err)
	}
	code, err := harness.ExitCode(st, time.Minute)
	if err != nil || code != 0 {
		return fmt.Errorf("exec %s in %s: exit %d, %v; want 0", execID, r.c.ID(), code, err)
	}
	if err := out.WaitFor(token+"\n", 30*time.Second); err != nil {
		return fmt.Errorf("exec %s in %s: %w", execID, r.c.ID(), err)
	}
	if _, err := p.Delete(ctx); err != nil {
		return fmt.Errorf("delete exec %s: %w", execID, err)
	}
	return nil
}

// stop sends SIGTERM, checks the exit code (7) and output, and deletes task and container.
func (s *soak) stop(ctx context.Context, r *running) error {
	id := r.c.ID()
	if err := r.task.Kill(ctx, syscall.SIGTERM); err != nil {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	code, err := harness.ExitCode(r.exit, time.Minute)
	if err != nil || code != 7 {
		return fmt.Errorf("task %s: exit %d, %v; want 7 after SIGTERM", id, code, err)
	}
	if err := r.stdout.WaitFor("waiting\ngot SIGTERM\n", 30*time.Second); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if _, err := r.task.Delete(ctx); err != nil {
		return fmt.Errorf("delete task %s: %w", id, err)
	}
	if err := r.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return fmt.Errorf("delete container %s: %w", id, err)
	}
	return nil
}

// cycle is one create/start/exec/kill/delete of container id, with its output checked.
func (s *soak) cycle(ctx context.Context, id string) error {
	r, err := s.start(ctx, id)
	if err != nil {
		s.remove(id)
		return err
	}
	if err := s.exec(ctx, r, "echo", "cycle "+id); err != nil {
		s.remove(id)
		return err
	}
	if err := s.stop(ctx, r); err != nil {
		s.remove(id)
		return err
	}
	return nil
}

// remove deletes container id and its task, whatever their state: the cleanup after a failed
// step, and the way back after a shim was killed. It returns the first error other than not
// found.
func (s *soak) remove(id string) error {
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 2*hcsTimeout+30*time.Second)
	defer cancel()
	client, _, err := s.cl(ctx)
	if err != nil {
		return err
	}
	c, err := client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if tk, err := c.Task(ctx, nil); err == nil {
		if _, err := tk.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete task %s: %w", id, err))
		}
	} else if !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("task of %s: %w", id, err))
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete container %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// churn runs cfg.cycles cycles, cfg.parallel at a time.
func (s *soak) churn(ctx context.Context, t *testing.T) {
	start := time.Now()
	errs := harness.Churn(s.cfg.cycles, s.cfg.parallel, func(i int) error { return s.cycle(ctx, fmt.Sprintf("churn-%d", i)) })
	if len(errs) > 0 {
		t.Fatalf("churn: %d cycles failed; first: %v", len(errs), errs[0])
	}
	t.Logf("soak: churn: %d cycles, %d at a time, in %v", s.cfg.cycles, s.cfg.parallel, time.Since(start).Round(time.Millisecond))
	s.checkClean(ctx, t, "churn")
}
