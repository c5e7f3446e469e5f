package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v2"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/ttrpc"

	"github.com/openhcs/runhcs/internal/computecore"
	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/test/harness"
)

// faultClient dials hcsemu's fault control; the faults it set are cleared when t ends.
func (s *soak) faultClient(t *testing.T) *emuclient.Fault {
	t.Helper()
	f, err := emuclient.DialFault(s.env.HCSEmuAddress)
	if err != nil {
		t.Fatalf("fault control: %v", err)
	}
	t.Cleanup(func() {
		if _, err := f.Clear(); err != nil {
			t.Errorf("clear faults: %v", err)
		}
		f.Close()
	})
	return f
}

// waitStalled waits until at least n calls wait on the stall of op: the stuck call is in
// hcsemu, and what the test does next happens while it is stuck.
func waitStalled(f *emuclient.Fault, op string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := f.List()
		if err != nil {
			return err
		}
		for _, st := range l.Stalls {
			if st.Op == op && st.Waiting >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no call of %s stalled within a minute (faults: %+v)", op, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shimPid waits for the serving shim of container id and returns its pid, or 0 when finished
// is closed (the call the shim was to die in returned) and there is no shim.
func (s *soak) shimPid(id string, finished <-chan struct{}) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-finished:
			if pids := s.env.ShimPids(id); len(pids) == 1 {
				return pids[0], nil
			}
			return 0, nil
		default:
		}
		if pids := s.env.ShimPids(id); len(pids) == 1 {
			return pids[0], nil
		} else if len(pids) > 1 {
			return 0, fmt.Errorf("shims of %s: %v, want one", id, pids)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no shim of %s within 30s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lifecycle points where shimKills kills a shim, each with the hcsemu operation that holds
// the shim there in the stalled variant.
var killPoints = []struct{ phase, stallOp string }{
	{"create", "start"},         // task create: StartComputeSystem
	{"start", "create-process"}, // task start: the init process
	{"exec", "create-process"},  // exec start
	{"delete", "terminate"},     // task delete: TerminateComputeSystem
}

// shimKills SIGKILLs the shim of a container cfg.kills times: first once at each point of the
// lifecycle, in the call held by a stall in hcsemu, then at random points (seeded), in the call
// held by a stall or at a random moment after the call was sent. After each, containerd (the shim's delete action) and a delete of what it
// still lists must leave nothing.
func (s *soak) shimKills(ctx context.Context, t *testing.T) {
	f := s.faultClient(t)
	counts := map[string]int{}
	attempts := 0
	for killed := 0; killed < s.cfg.kills; attempts++ {
		p := killPoints[s.rng.Intn(len(killPoints))]
		stalled := s.rng.Intn(2) == 0
		delay := time.Duration(s.rng.Intn(200)) * time.Millisecond
		if attempts < len(killPoints) {
			// Every point once for certain, held there; the rest at random.
			p, stalled = killPoints[attempts], true
		}
		id := fmt.Sprintf("kill-%d", attempts)
		how := fmt.Sprintf("%s after %v", p.phase, delay)
		if stalled {
			how = fmt.Sprintf("%s, held in %s", p.phase, p.stallOp)
		}
		did, err := s.killOnce(ctx, f, id, p.phase, p.stallOp, stalled, delay)
		if err != nil {
			t.Fatalf("shim kill %d (%s): %v", attempts, how, err)
		}
		if did {
			killed++
			counts[p.phase]++
		}
		if err := s.remove(id); err != nil {
			t.Fatalf("shim kill %d (%s): delete after the kill: %v", attempts, how, err)
		}
		s.checkClean(ctx, t, fmt.Sprintf("shim kill %d (%s)", attempts, how))
	}
	t.Logf("soak: shim kills: %d (by point: %v); %d attempts (in the others the call and its shim were done before the moment came)", s.cfg.kills, counts, attempts)
}

// killOnce brings container id to the phase, sends the call of the phase and kills the shim
// during it (stalled), or delay after it was sent. It reports whether a shim was killed: a
// delete may finish, and its shim exit, before the delay is up.
func (s *soak) killOnce(ctx context.Context, f *emuclient.Fault, id, phase, stallOp string, stalled bool, delay time.Duration) (bool, error) {
	var call func(context.Context) error
	switch phase {
	case "create":
		c, err := s.newContainer(ctx, id, workload("wait-signal", "7")...)
		if err != nil {
			return false, err
		}
		call = func(ctx context.Context) error {
			_, err := c.NewTask(ctx, cio.NullIO)
			return err
		}
	case "start":
		c, err := s.newContainer(ctx, id, workload("wait-signal", "7")...)
		if err != nil {
			return false, err
		}
		tk, err := c.NewTask(ctx, cio.NullIO)
		if err != nil {
			return false, err
		}
		call = tk.Start
	case "exec":
		r, err := s.start(ctx, id)
		if err != nil {
			return false, err
		}
		spec, err := r.c.Spec(ctx)
		if err != nil {
			return false, err
		}
		ps := *spec.Process
		ps.Args, ps.CommandLine = workload("echo", "never seen"), ""
		p, err := r.task.Exec(ctx, "x", &ps, cio.NullIO)
		if err != nil {
			return false, err
		}
		call = p.Start
	case "delete":
		r, err := s.start(ctx, id)
		if err != nil {
			return false, err
		}
		if err := r.task.Kill(ctx, syscall.SIGKILL); err != nil {
			return false, err
		}
		if _, err := harness.ExitCode(r.exit, time.Minute); err != nil {
			return false, err
		}
		call = func(ctx context.Context) error {
			_, err := r.task.Delete(ctx)
			return err
		}
	}
	if stalled {
		if _, err := f.Stall(stallOp, 0); err != nil {
			return false, err
		}
	}
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() { done <- call(ctx); close(finished) }()
	if stalled {
		if err := waitStalled(f, stallOp, 1); err != nil {
			return false, err
		}
	} else {
		time.Sleep(delay)
	}
	pid, err := s.shimPid(id, finished)
	if err != nil {
		return false, err
	}
	if pid != 0 {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return false, fmt.Errorf("kill shim %d: %w", pid, err)
		}
	}
	if _, err := f.Clear(); err != nil {
		return false, err
	}
	select {
	case <-done: // an error, or success if the call won the race; either is fine
	case <-time.After(time.Minute):
		return false, fmt.Errorf("the %s call did not return within a minute of its shim's death", phase)
	}
	return pid != 0, nil
}

// shimTask is a ttrpc client of the task service of container id's shim, through the address
// the shim wrote in its bundle, so the test measures the shim itself and not containerd.
func (s *soak) shimTask(t *testing.T, id string) taskapi.TTRPCTaskService {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.env.Root, "containerd", "state", "io.containerd.runtime.v2.task", harness.Namespace, id, "address"))
	if err != nil {
		t.Fatalf("address of the shim of %s: %v", id, err)
	}
	addr := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
	conn, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatalf("dial the shim of %s at %s: %v", id, addr, err)
	}
	c := ttrpc.NewClient(conn)
	t.Cleanup(func() { c.Close() })
	return taskapi.NewTTRPCTaskClient(c)
}

// quickBound is the bound on the answers of a shim and of containerd while HCS is
// stuck: a liveness property (they answer at all while a call hangs), checked with the
// generous bound the issue states; nothing else in the suite is timed.
const quickBound = time.Second

// measureQuick runs a query that must answer within quickBound while HCS is stuck.
func measureQuick(ctx context.Context, t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err := call(qctx)
	took := time.Since(start)
	t.Logf("soak: stuck HCS: %s answered in %v (%v)", what, took.Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("%s with HCS stuck: %v", what, err)
	}
	if took > quickBound {
		t.Errorf("%s with HCS stuck took %v; want at most %v", what, took, quickBound)
	}
}

// measureShim checks State, Pids and Connect of container id's shim and ctr task ls.
func (s *soak) measureShim(ctx context.Context, t *testing.T, id string, running bool) {
	t.Helper()
	shim := s.shimTask(t, id)
	measureQuick(ctx, t, "State of "+id, func(ctx context.Context) error {
		_, err := shim.State(ctx, &taskapi.StateRequest{ID: id})
		return err
	})
	measureQuick(ctx, t, "Pids of "+id, func(ctx context.Context) error {
		r, err := shim.Pids(ctx, &taskapi.PidsRequest{ID: id})
		if err == nil && running && len(r.GetProcesses()) == 0 {
			err = errors.New("no process listed for a running task")
		}
		return err
	})
	measureQuick(ctx, t, "Connect of "+id, func(ctx context.Context) error {
		r, err := shim.Connect(ctx, &taskapi.ConnectRequest{ID: id})
		if err == nil && r.GetShimPid() == 0 {
			err = errors.New("no shim pid")
		}
		return err
	})
	measureQuick(ctx, t, "ctr task ls", func(ctx context.Context) error {
		out, stderr, err := s.env.Ctr(ctx, "task", "ls")
		if err == nil && !strings.Contains(out, id) {
			err = fmt.Errorf("%s not listed: %q %q", id, out, stderr)
		}
		return err
	})
}

// wantTimeout checks that a stuck call failed with a timeout error naming names.
func wantTimeout(t *testing.T, what string, began time.Time, err error, names ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s with HCS stuck succeeded", what)
		return
	}
	t.Logf("soak: stuck HCS: %s failed after %v: %v", what, time.Since(began).Round(time.Millisecond), err)
	msg := err.Error()
	if !strings.Contains(msg, "deadline exceeded") && !strings.Contains(msg, "timeout") && !strings.Contains(msg, "timed out") {
		t.Errorf("%s: %q does not say it timed out", what, msg)
	}
	for _, n := range names {
		if !strings.Contains(msg, n) {
			t.Errorf("%s: %q does not name %q", what, msg, n)
		}
	}
}

// stuck holds HCS calls in hcsemu by stalls, in two phases. First StartComputeSystem,
// CreateProcess, GetComputeSystemProperties and TerminateComputeSystem, while a task create
// (stuck-a, whose undo is stuck too) and an exec
// (stuck-b) need them; then TerminateComputeSystem and GetComputeSystemProperties, while a
// killed task ends and is deleted (stuck-c). Meanwhile the shims' State, Pids and Connect and
// ctr task ls must answer within quickBound; the stuck calls must fail after the shims' HCS
// timeout with an error naming the operation and the system; once a stall is released,
// deleting everything must leave nothing.
func (s *soak) stuck(ctx context.Context, t *testing.T) {
	f := s.faultClient(t)
	bound := 2*hcsTimeout + time.Minute

	// Phase 1: create and start stuck.
	b, err := s.start(ctx, "stuck-b")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := s.newContainer(ctx, "stuck-a", workload("echo", "never")...)
	if err != nil {
		t.Fatal(err)
	}
	// terminate too: the failed create's undo then cannot end stuck-a either, nor can the
	// shim's delete action once containerd gives up on the shim (the compound case). HCS ends
	// the system when the last handle to it closes (ShouldTerminateOnLastHandleClosed), so
	// nothing may be left once the stalls are released.
	for _, op := range []string{"start", "create-process", "properties", "terminate"} {
		if _, err := f.Stall(op, 0); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	createErr := make(chan error, 1)
	go func() {
		tk, err := ca.NewTask(ctx, cio.NullIO)
		if err == nil {
			_, _ = tk.Delete(ctx, containerd.WithProcessKill)
			err = errors.New("task create succeeded with StartComputeSystem stalled")
		}
		createErr <- err
	}()
	spec, err := b.c.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps := *spec.Process
	ps.Args, ps.CommandLine = workload("echo", "never seen"), ""
	ex, err := b.task.Exec(ctx, "stuck-exec", &ps, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	execErr := make(chan error, 1)
	go func() { execErr <- ex.Start(ctx) }()
	for _, op := range []string{"start", "create-process"} {
		if err := waitStalled(f, op, 1); err != nil {
			t.Fatal(err)
		}
	}
	s.measureShim(ctx, t, "stuck-b", true)
	measureQuick(ctx, t, "Connect of stuck-a (its create stuck)", func(ctx context.Context) error {
		_, err := s.shimTask(t, "stuck-a").Connect(ctx, &taskapi.ConnectRequest{ID: "stuck-a"})
		return err
	})
	select {
	case err := <-createErr:
		wantTimeout(t, "task create of stuck-a", began, err, "StartComputeSystem", "stuck-a")
	case <-time.After(bound):
		t.Fatalf("task create of stuck-a did not fail within %v", bound)
	}
	select {
	case err := <-execErr:
		wantTimeout(t, "exec start in stuck-b", began, err, "CreateProcess", "stuck-b")
	case <-time.After(bound):
		t.Fatalf("exec start in stuck-b did not fail within %v", bound)
	}
	if _, err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Delete(ctx); err != nil {
		t.Errorf("delete the failed exec: %v", err)
	}
	if err := s.exec(ctx, b, "after", "after the stall"); err != nil {
		t.Errorf("exec in stuck-b after the stall was released: %v", err)
	}
	if err := s.stop(ctx, b); err != nil {
		t.Error(err)
	}
	for _, id := range []string{"stuck-a", "stuck-b"} {
		if err := s.remove(id); err != nil {
			t.Errorf("remove %s: %v", id, err)
		}
	}
	s.checkClean(ctx, t, "the create and start stalls were released")

	// Phase 2: terminate stuck.
	c, err := s.start(ctx, "stuck-c")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"terminate", "properties"} {
		if _, err := f.Stall(op, 0); err != nil {
			t.Fatal(err)
		}
	}
	began = time.Now()
	if err := c.task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitStalled(f, "terminate", 1); err != nil {
		t.Fatal(err)
	}
	s.measureShim(ctx, t, "stuck-c", false)
	// stuck-c's exit is reported once the terminate after its end gave up; its delete
	// retries the terminate, which is still stuck.
	if _, err := harness.ExitCode(c.exit, bound); err != nil {
		t.Fatalf("stuck-c: %v", err)
	}
	_, err = c.task.Delete(ctx)
	wantTimeout(t, "task delete of stuck-c", began, err, "TerminateComputeSystem", "stuck-c")
	if _, err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.task.Delete(ctx); err != nil {
		t.Errorf("task delete of stuck-c after the stall was released: %v", err)
	}
	if err := s.remove("stuck-c"); err != nil {
		t.Errorf("remove stuck-c: %v", err)
	}
	s.checkClean(ctx, t, "the terminate stall was released")
}

// injected is an HRESULT failure of one hcsemu operation at one step of the lifecycle.
type injected struct {
	step string // create, start or delete
	op   string // the wire method, which the error must name
	// fails: the step fails with an error naming op; else the failure is of a call whose
	// error the step ignores (closing a handle), and the step succeeds.
	fails bool
}

// The hcsemu operations of a task's lifecycle, in the order the shim calls them (seen in
// hcsemu's requests: create = CreateComputeSystem, StartComputeSystem; start = CreateProcess;
// delete = TerminateComputeSystem, CloseComputeSystem).
var injections = []injected{
	{"create", "CreateComputeSystem", true},
	{"create", "StartComputeSystem", true},
	{"start", "CreateProcess", true},
	{"delete", "TerminateComputeSystem", true},
	{"delete", "CloseComputeSystem", false},
}

// failures fails each operation of create, start and delete with an HRESULT: the error names
// the operation, the undo runs (or, once the failure is cleared, a retried delete finishes
// the job), nothing is left.
func (s *soak) failures(ctx context.Context, t *testing.T) {
	f := s.faultClient(t)
	const hr = computecore.E_FAIL
	for i, in := range injections {
		id := fmt.Sprintf("fail-%d", i)
		what := fmt.Sprintf("%s with %s failing (%#x)", in.step, in.op, uint32(hr))
		err := s.failOnce(ctx, f, id, in, hr)
		switch {
		case in.fails && err == nil:
			t.Errorf("%s: succeeded", what)
		case in.fails && !strings.Contains(err.Error(), in.op):
			t.Errorf("%s: error %q does not name %s", what, err, in.op)
		case !in.fails && err != nil:
			t.Errorf("%s: %v; want the step to succeed", what, err)
		default:
			t.Logf("soak: injected failure: %s: %v", what, err)
		}
		if _, err := f.Clear(); err != nil {
			t.Fatal(err)
		}
		if err := s.remove(id); err != nil {
			t.Errorf("%s: delete afterwards: %v", what, err)
		}
		s.checkClean(ctx, t, what)
	}
}

// failOnce runs container id up to in.step, makes the step's op fail and returns the step's
// error.
func (s *soak) failOnce(ctx context.Context, f *emuclient.Fault, id string, in injected, hr computecore.HRESULT) error {
	// Every call of op fails until the caller clears the fault: one failure is not enough where
	// the shim retries (a terminate through a failing handle is retried on the system opened
	// afresh by id).
	inject := func() error {
		_, err := f.Fail(in.op, hr, 0)
		return err
	}
	switch in.step {
	case "create":
		c, err := s.newContainer(ctx, id, workload("echo", "never")...)
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		if err := inject(); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		tk, err := c.NewTask(ctx, cio.NullIO)
		if err == nil {
			_, _ = tk.Delete(ctx, containerd.WithProcessKill)
		}
		return err
	case "start":
		c, err := s.newContainer(ctx, id, workload("echo", "never")...)
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		tk, err := c.NewTask(ctx, cio.NullIO)
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		if err := inject(); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		return tk.Start(ctx)
	default: // delete
		r, err := s.start(ctx, id)
		if err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		if err := r.task.Kill(ctx, syscall.SIGKILL); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		if _, err := harness.ExitCode(r.exit, time.Minute); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		if err := inject(); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		// A failed delete is retried by the caller once the failure is cleared (remove).
		_, err = r.task.Delete(ctx)
		return err
	}
}

// containerdRestarts restarts containerd cfg.containerdRestart times (SIGTERM or SIGKILL, by
// the seed) with four tasks running: after each, every task is listed running with the same
// pid; after the last, exec, kill and delete work and the output is the tasks' own.
func (s *soak) containerdRestarts(ctx context.Context, t *testing.T) {
	var rs []*running
	pids := map[string]uint32{}
	for i := 0; i < 4; i++ {
		r, err := s.start(ctx, fmt.Sprintf("restart-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
		pids[r.c.ID()] = r.task.Pid()
	}
	start := time.Now()
	for i := 0; i < s.cfg.containerdRestart; i++ {
		sig := syscall.SIGTERM
		if s.rng.Intn(2) == 1 {
			sig = syscall.SIGKILL
		}
		s.closeClient()
		if err := s.env.RestartDaemon(ctx, harness.DaemonContainerd, sig); err != nil {
			t.Fatalf("restart %d (%v): %v", i, sig, err)
		}
		client, _, err := s.cl(ctx)
		if err != nil {
			t.Fatalf("after restart %d (%v): %v", i, sig, err)
		}
		for _, r := range rs {
			id := r.c.ID()
			c, err := client.LoadContainer(ctx, id)
			if err != nil {
				t.Fatalf("after restart %d (%v): %s: %v", i, sig, id, err)
			}
			tk, err := c.Task(ctx, nil)
			if err != nil {
				t.Fatalf("after restart %d (%v): task %s: %v", i, sig, id, err)
			}
			st, err := tk.Status(ctx)
			if err != nil || st.Status != containerd.Running || tk.Pid() != pids[id] {
				t.Fatalf("after restart %d (%v): task %s: %+v pid %d, %v; want running, pid %d", i, sig, id, st, tk.Pid(), err, pids[id])
			}
			r.c, r.task = c, tk
		}
	}
	t.Logf("soak: containerd restarts: %d with %d tasks running, in %v", s.cfg.containerdRestart, len(rs), time.Since(start).Round(time.Millisecond))
	for _, r := range rs {
		var err error
		if r.exit, err = r.task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.exec(ctx, r, "after", "after the restarts"); err != nil {
			t.Fatal(err)
		}
		if err := s.stop(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s.checkClean(ctx, t, "the containerd restarts")
}

// hcsemuRestarts kills hcsemu with three containers running and starts it again,
// cfg.hcsemuRestarts times: the containers are gone with it, their tasks exit with a failure,
// delete cleans up, and a new container runs on the new daemon.
func (s *soak) hcsemuRestarts(ctx context.Context, t *testing.T) {
	for i := 0; i < s.cfg.hcsemuRestarts; i++ {
		var rs []*running
		for j := 0; j < 3; j++ {
			r, err := s.start(ctx, fmt.Sprintf("emu-%d-%d", i, j))
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		if err := s.env.RestartDaemon(ctx, harness.DaemonHCSEmu, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			code, err := harness.ExitCode(r.exit, 2*hcsTimeout+time.Minute)
			if err != nil {
				t.Fatalf("%s after hcsemu died: %v", r.c.ID(), err)
			}
			if code == 0 {
				t.Errorf("%s: exit code 0 after its compute system vanished; want a failure", r.c.ID())
			}
			if _, err := r.task.Delete(ctx); err != nil {
				t.Errorf("delete task %s: %v", r.c.ID(), err)
			}
			if err := r.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
				t.Errorf("delete container %s: %v", r.c.ID(), err)
			}
		}
		s.checkClean(ctx, t, fmt.Sprintf("hcsemu restart %d", i))
		if err := s.cycle(ctx, fmt.Sprintf("emu-after-%d", i)); err != nil {
			t.Fatalf("a cycle after hcsemu restart %d: %v", i, err)
		}
	}
	t.Logf("soak: hcsemu restarts: %d with 3 containers running each", s.cfg.hcsemuRestarts)
	s.checkClean(ctx, t, "the hcsemu restarts")
}
