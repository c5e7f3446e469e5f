package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/openhcs/runhcs/test/harness"
)

// TestFaults kills or restarts the pieces under a running task: containerd (the task survives
// and its exit is still reported), the shim (containerd's cleanup leaves no compute system and
// no mount), hcsemu (the task is reported exited, and new tasks run on the restarted daemon).
// Each case ends with the environment healthy, so they share one.
func TestFaults(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	t.Run("containerd restarted", func(t *testing.T) { testContainerdRestart(ctx, t, env) })
	t.Run("shim killed", func(t *testing.T) { testShimKilled(ctx, t, env) })
	t.Run("hcsemu restarted", func(t *testing.T) { testHCSEmuRestart(ctx, t, env) })
}

func testContainerdRestart(ctx context.Context, t *testing.T, env *harness.Env) {
	const id = "fault-containerd"
	// Long enough to outlive the restart, short enough to exit on its own afterwards.
	const sleep = 6 * time.Second
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "6")})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	pid := tk.Task.Pid()
	if err := env.RestartDaemon(ctx, harness.DaemonContainerd, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if time.Since(started) > sleep-2*time.Second {
		t.Fatalf("containerd took %v to restart: too long to see the task still running", time.Since(started))
	}

	// The restarted containerd reconnects to the shim: the task is listed, running, same pid.
	waitTaskStatus(ctx, t, env, id, "RUNNING")
	c, err := env.Client(t).LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatalf("task of %s after the restart: %v", id, err)
	}
	if task.Pid() != pid {
		t.Errorf("pid %d after the restart, was %d", task.Pid(), pid)
	}
	exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
	status, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Its later exit is reported: the event, Wait, and ctr task ls.
	ev := exits.WaitExit(t, id, 30*time.Second)
	if ev.ExitStatus != 0 || ev.Pid != pid {
		t.Errorf("TaskExit %+v, want pid %d status 0", ev, pid)
	}
	code, err := waitExit(t, id, status, 30*time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; want 0", code, err)
	}
	waitTaskStatus(ctx, t, env, id, "STOPPED")
	if _, err := task.Delete(ctx); err != nil {
		t.Fatalf("delete after the restart: %v", err)
	}
}

func testShimKilled(ctx context.Context, t *testing.T, env *harness.Env) {
	const id = "fault-shim"
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "60")})
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := env.SnapshotMounts(ctx, t, tk.Container)
	if err != nil || len(mounts) != 1 {
		t.Fatalf("snapshot mounts: %v, %v", mounts, err)
	}
	scratch := mounts[0].Source
	if len(harness.MountsUnder(scratch)) == 0 {
		t.Fatalf("no mount under the scratch layer %s of the running task", scratch)
	}
	if systemState(ctx, t, env, id) != "Running" {
		t.Fatalf("compute system %s is not running in hcsemu", id)
	}
	shims := env.ShimPids(id)
	if len(shims) != 1 {
		t.Fatalf("shims of %s: %v, want one", id, shims)
	}
	exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
	if err := syscall.Kill(shims[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// containerd sees the shim die, runs the shim's delete action and reports the exit. A Wait
	// in flight ends either way: with the status, or with the shim's connection closed (as
	// with runc's shim); the event is the report.
	ev := exits.WaitExit(t, id, 30*time.Second)
	// The delete action reports the init process's pid from the task state, as runc's shim
	// reports its init's, and a non-zero status.
	if ev.Pid != tk.Task.Pid() || ev.ExitStatus == 0 {
		t.Errorf("TaskExit after the shim was killed: pid %d status %d, want pid %d and a non-zero status", ev.Pid, ev.ExitStatus, tk.Task.Pid())
	}
	select {
	case <-tk.Exit:
	case <-time.After(30 * time.Second):
		t.Fatal("a Wait of the task did not end after its shim was killed")
	}
	if st, err := taskStatus(ctx, env, id); err != nil || (st != "" && st != "STOPPED") {
		t.Fatalf("after the shim was killed ctr task ls shows %q (%v); want it gone or stopped", st, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		state := systemState(ctx, t, env, id)
		left := harness.MountsUnder(scratch)
		if state == "" && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the shim was killed: compute system state %q, mounts %v; want none", state, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := tk.Task.Delete(ctx); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("task delete after the shim died: %v", err)
	}
	// Nothing of it mounted anywhere under the environment's root (no other task runs now).
	if left := env.TaskMountsUnderRoot(); len(left) > 0 {
		t.Errorf("after the shim was killed, mounted under %s: %v", env.Root, left)
	}
	// The container can run a new task: nothing of the old one (state, mount, system) is in
	// the way. Its command is still sleep 60; kill it once it runs.
	task, err := tk.Container.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatalf("new task in %s after the shim was killed: %v", id, err)
	}
	status, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start a new task in %s after the shim was killed: %v", id, err)
	}
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := waitExit(t, id, status, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

func testHCSEmuRestart(ctx context.Context, t *testing.T, env *harness.Env) {
	a, err := env.StartTask(ctx, t, harness.TaskRun{ID: "fault-hcsemu-a", Args: workload("sleep", "60")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.StartTask(ctx, t, harness.TaskRun{ID: "fault-hcsemu-b", Args: workload("wait-signal", "3")})
	if err != nil {
		t.Fatal(err)
	}
	exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
	if err := env.RestartDaemon(ctx, harness.DaemonHCSEmu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*harness.Task{a, b} {
		id := tk.Container.ID()
		exits.WaitExit(t, id, 30*time.Second)
		code, err := waitExit(t, id, tk.Exit, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			t.Errorf("%s: exit code 0 after its compute system vanished; want a failure code", id)
		}
		waitTaskStatus(ctx, t, env, id, "STOPPED")
		if _, err := tk.Task.Delete(ctx); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	if left := env.TaskMountsUnderRoot(); len(left) > 0 {
		t.Errorf("after the tasks of the dead hcsemu were deleted, mounted under %s: %v", env.Root, left)
	}
	if systems, err := env.ComputeSystems(ctx); err != nil || len(systems) != 0 {
		t.Errorf("compute systems in the restarted hcsemu: %+v, %v; want none", systems, err)
	}
	// The restarted daemon serves new tasks, through shims that reconnect to it.
	res, err := env.RunWithClient(ctx, t, harness.ClientRun{ID: "fault-hcsemu-after", Args: workload("echo", "ok")})
	if err != nil || strings.TrimSpace(res.Stdout) != "ok" {
		t.Fatalf("run after hcsemu restarted: %v, %+v", err, res)
	}
}
