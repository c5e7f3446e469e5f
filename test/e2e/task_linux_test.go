package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// TestTask drives the task API of the shim through containerd, with containerd's Go client and
// with ctr: a console with resize, exec, kill, pause/resume, pids, metrics, update, delete and
// refused specs. Running to completion, exit codes, stdout/stderr and stdin are TestBasic's.
func TestTask(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	t.Run("console", func(t *testing.T) { testConsole(ctx, t, env) })
	t.Run("exec", func(t *testing.T) { testExec(ctx, t, env) })
	t.Run("kill", func(t *testing.T) { testKill(ctx, t, env) })
	t.Run("pause and resume", func(t *testing.T) { testPauseResume(ctx, t, env) })
	t.Run("pids", func(t *testing.T) { testPids(ctx, t, env) })
	t.Run("metrics", func(t *testing.T) { testMetrics(ctx, t, env) })
	t.Run("update", func(t *testing.T) { testUpdate(ctx, t, env) })
	t.Run("delete", func(t *testing.T) { testDelete(ctx, t, env) })
	t.Run("bad spec refused", func(t *testing.T) { testBadSpec(ctx, t, env) })
}

// workload is the test image's workload command line with args.
func workload(args ...string) []string { return append([]string{image.WorkloadPath}, args...) }

// waitExit waits for a task's exit status, at most d.
func waitExit(t *testing.T, what string, ch <-chan containerd.ExitStatus, d time.Duration) (uint32, error) {
	t.Helper()
	code, err := harness.ExitCode(ch, d)
	if err != nil {
		return code, fmt.Errorf("%s: %w", what, err)
	}
	return code, nil
}

// execResult is what an exec produced.
type execResult struct {
	stdout, stderr string
	code           uint32
}

// execIn runs args as exec id in a running task with the Go client, waits for it and deletes it.
func execIn(ctx context.Context, t *testing.T, env *harness.Env, tk *harness.Task, id string, args ...string) (execResult, error) {
	t.Helper()
	spec, err := tk.Container.Spec(ctx)
	if err != nil {
		return execResult{}, err
	}
	pspec := *spec.Process
	pspec.Args, pspec.CommandLine, pspec.Terminal = args, "", false
	return execSpec(ctx, t, env, tk, id, &pspec)
}

// execSpec runs pspec as exec id in a running task with the Go client, waits for it and deletes
// it.
func execSpec(ctx context.Context, t *testing.T, env *harness.Env, tk *harness.Task, id string, pspec *specs.Process) (execResult, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	p, err := tk.Task.Exec(ctx, id, pspec, cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr), cio.WithFIFODir(filepath.Join(env.Root, "fifo"))))
	if err != nil {
		return execResult{}, fmt.Errorf("exec %s: %w", id, err)
	}
	status, err := p.Wait(ctx)
	if err != nil {
		return execResult{}, fmt.Errorf("wait exec %s: %w", id, err)
	}
	if err := p.Start(ctx); err != nil {
		_, _ = p.Delete(ctx, containerd.WithProcessKill)
		return execResult{}, fmt.Errorf("start exec %s: %w", id, err)
	}
	code, err := waitExit(t, "exec "+id, status, time.Minute)
	if err != nil {
		return execResult{}, err
	}
	if _, err := p.Delete(ctx); err != nil {
		return execResult{}, fmt.Errorf("delete exec %s: %w", id, err)
	}
	return execResult{stdout: stdout.String(), stderr: stderr.String(), code: code}, nil
}

// killAndWait kills a task with SIGKILL and waits for its exit, failing t if it does not come.
func killAndWait(ctx context.Context, t *testing.T, tk *harness.Task) {
	t.Helper()
	if err := tk.Task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", tk.Container.ID(), err)
	}
	if _, err := waitExit(t, tk.Container.ID(), tk.Exit, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

func testConsole(ctx context.Context, t *testing.T, env *harness.Env) {
	t.Run("tty", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "console-tty", Args: workload("tty"), Terminal: true})
		if err != nil {
			t.Fatal(err)
		}
		code, err := waitExit(t, "console-tty", tk.Exit, time.Minute)
		if err != nil || code != 0 {
			t.Fatalf("exit %d, %v; want 0", code, err)
		}
		if _, err := tk.Task.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		// A console turns "\n" into "\r\n".
		if got := strings.TrimRight(tk.Stdout(), "\r\n"); got != "tty" {
			t.Fatalf("console output %q, want %q", tk.Stdout(), "tty")
		}
	})
	t.Run("no tty without a terminal", func(t *testing.T) {
		res, err := env.RunWithClient(ctx, t, harness.ClientRun{ID: "console-notty", Args: workload("tty")})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(res.Stdout) != "notty" {
			t.Fatalf("stdout %q, want notty", res.Stdout)
		}
	})
	t.Run("resize", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "console-resize", Args: workload("sleep", "60"), Terminal: true})
		if err != nil {
			t.Fatal(err)
		}
		// Under hcsemu a container process is a host process and its console a pty: the pty's
		// window size is what HCS's ConsoleSize sets.
		pid := tk.Task.Pid()
		for _, size := range []struct{ w, h uint32 }{{100, 30}, {132, 43}} {
			if err := tk.Task.Resize(ctx, size.w, size.h); err != nil {
				t.Fatalf("resize to %dx%d: %v", size.w, size.h, err)
			}
			ws, err := winsize(pid)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(ws.Col) != size.w || uint32(ws.Row) != size.h {
				t.Fatalf("console of pid %d is %dx%d after Resize(%d, %d)", pid, ws.Col, ws.Row, size.w, size.h)
			}
		}
		killAndWait(ctx, t, tk)
	})
	t.Run("resize without a console refused", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "console-none", Args: workload("sleep", "60")})
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Task.Resize(ctx, 80, 25); err == nil {
			t.Fatal("Resize of a process without a console succeeded")
		}
		killAndWait(ctx, t, tk)
	})
}

// winsize reads the window size of the terminal on a host process's stdout.
func winsize(pid uint32) (*unix.Winsize, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/1", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return nil, fmt.Errorf("TIOCGWINSZ on the stdout of pid %d: %w", pid, err)
	}
	return ws, nil
}

func testExec(ctx context.Context, t *testing.T, env *harness.Env) {
	t.Run("client", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "exec-client", Args: workload("sleep", "60")})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name           string
			args           []string
			code           uint32
			stdout, stderr string
		}{
			{"stdout", workload("echo", "from", "exec"), 0, "from exec", ""},
			{"stderr", workload("stderr", "exec", "err"), 0, "", "exec err"},
			{"exit code", workload("exit", "7"), 7, "", ""},
			{"sees the init's environment", workload("env", "PATH"), 0, "PATH=" + image.DefaultPath, ""},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := execIn(ctx, t, env, tk, fmt.Sprintf("e%d", i), tt.args...)
				if err != nil {
					t.Fatal(err)
				}
				if res.code != tt.code || strings.TrimRight(res.stdout, "\r\n") != tt.stdout || strings.TrimRight(res.stderr, "\r\n") != tt.stderr {
					t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", res.code, res.stdout, res.stderr, tt.code, tt.stdout, tt.stderr)
				}
			})
		}
		// hcsemu's process isolation (internal/hcsemu/compute silo_linux.go): an exec sees its
		// container's processes, its silo init (PID 1, smss), the task's init and itself;
		// not the host's nor other containers'.
		t.Run("sees its container's processes only", func(t *testing.T) {
			res, err := execIn(ctx, t, env, tk, "ps", workload("ps")...)
			if err != nil || res.code != 0 {
				t.Fatalf("ps: %v, exit %d, stderr %q", err, res.code, res.stderr)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
				_, name, _ := strings.Cut(strings.TrimSpace(l), " ")
				got = append(got, name)
			}
			if want := []string{"smss", image.WorkloadPath, image.WorkloadPath}; !slices.Equal(got, want) || !strings.HasPrefix(res.stdout, "1 smss") {
				t.Fatalf("ps lists %q (%q), want %q with smss as PID 1", got, res.stdout, want)
			}
		})
		t.Run("init keeps running", func(t *testing.T) {
			st, err := tk.Task.Status(ctx)
			if err != nil || st.Status != containerd.Running {
				t.Fatalf("init status %v, %v; want running", st.Status, err)
			}
		})
		killAndWait(ctx, t, tk)
	})

	t.Run("ctr", func(t *testing.T) {
		const id = "exec-ctr"
		if err := env.CtrRunDetached(ctx, id, "", nil, workload("sleep", "60")...); err != nil {
			t.Fatal(err)
		}
		defer removeWithCtr(ctx, t, env, id)
		stdout, stderr, err := env.Ctr(ctx, append([]string{"task", "exec", "--exec-id", "x1", id}, workload("echo", "hi", "from", "ctr")...)...)
		if err != nil || strings.TrimRight(stdout, "\r\n") != "hi from ctr" {
			t.Fatalf("ctr task exec echo: %v, stdout %q, stderr %q", err, stdout, stderr)
		}
		_, stderr, err = env.Ctr(ctx, append([]string{"task", "exec", "--exec-id", "x2", id}, workload("exit", "5")...)...)
		if code := exitCode(err); code != 5 {
			t.Fatalf("ctr task exec exit 5: ctr exited %d (%v), stderr %q", code, err, stderr)
		}
	})
}

// exitCode is the exit code of a command that returned err (0 for nil, -1 if it did not exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// removeWithCtr kills, deletes and removes a container started with ctr, reporting errors.
func removeWithCtr(ctx context.Context, t *testing.T, env *harness.Env, id string) {
	t.Helper()
	_, _, _ = env.Ctr(ctx, "task", "kill", "--signal", "SIGKILL", id)
	if _, stderr, err := env.Ctr(ctx, "task", "delete", "--force", id); err != nil && !strings.Contains(stderr, "not found") {
		t.Errorf("ctr task delete --force %s: %v: %s", id, err, stderr)
	}
	if _, stderr, err := env.Ctr(ctx, "container", "delete", id); err != nil && !strings.Contains(stderr, "not found") {
		t.Errorf("ctr container delete %s: %v: %s", id, err, stderr)
	}
}

func testKill(ctx context.Context, t *testing.T, env *harness.Env) {
	tests := []struct {
		name   string
		sig    syscall.Signal
		args   []string
		code   uint32
		output string // stdout must contain it
	}{
		// Windows: SIGTERM is CTRL_SHUTDOWN_EVENT, SIGINT CTRL_C_EVENT; the workload sees the
		// event and exits with its own code.
		{"SIGTERM graceful", syscall.SIGTERM, workload("wait-signal", "42"), 42, "got SIGTERM"},
		{"SIGINT graceful", syscall.SIGINT, workload("wait-signal", "43"), 43, "got SIGINT"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: fmt.Sprintf("kill-%d", i), Args: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := tk.WaitOutput(wctx, "waiting"); err != nil {
				t.Fatal(err)
			}
			if err := tk.Task.Kill(ctx, tt.sig); err != nil {
				t.Fatalf("kill %v: %v", tt.sig, err)
			}
			code, err := waitExit(t, "task", tk.Exit, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tk.Task.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(tk.Stdout(), tt.output) {
				t.Fatalf("exit %d, stdout %q; want %d and %q", code, tk.Stdout(), tt.code, tt.output)
			}
		})
	}

	t.Run("SIGKILL forced", func(t *testing.T) {
		// wait-signal would outlive SIGTERM/SIGINT handling; SIGKILL is termination, which no
		// handler sees.
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "kill-forced", Args: workload("wait-signal", "42")})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := tk.WaitOutput(wctx, "waiting"); err != nil {
			t.Fatal(err)
		}
		if err := tk.Task.Kill(ctx, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		code, err := waitExit(t, "task", tk.Exit, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 || code == 42 || strings.Contains(tk.Stdout(), "got") {
			t.Fatalf("exit %d, stdout %q; want a terminated process (non-zero, not the handler's 42)", code, tk.Stdout())
		}
	})

	t.Run("unsupported signal refused", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "kill-usr1", Args: workload("sleep", "60")})
		if err != nil {
			t.Fatal(err)
		}
		err = tk.Task.Kill(ctx, syscall.SIGUSR1)
		if err == nil || !strings.Contains(err.Error(), "signal 10") {
			t.Fatalf("kill SIGUSR1: %v; want an error naming signal 10", err)
		}
		if st, err := tk.Task.Status(ctx); err != nil || st.Status != containerd.Running {
			t.Fatalf("after the refused signal: %v, %v; want running", st.Status, err)
		}
		killAndWait(ctx, t, tk)
	})

	t.Run("ctr", func(t *testing.T) {
		const id = "kill-ctr"
		// The init's stdout goes to a file (containerd's file:// log URI), where the test sees
		// the workload's "waiting" before it signals.
		logPath := filepath.Join(t.TempDir(), "kill-ctr.log")
		if err := env.CtrRunDetached(ctx, id, "", []string{"--log-uri", "file://" + logPath}, workload("wait-signal", "42")...); err != nil {
			t.Fatal(err)
		}
		defer removeWithCtr(ctx, t, env, id)
		output := func() string { b, _ := os.ReadFile(logPath); return string(b) }
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(output(), "waiting") {
			if time.Now().After(deadline) {
				t.Fatalf("the workload's log %s has %q, no \"waiting\" after 30s", logPath, output())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, stderr, err := env.Ctr(ctx, "task", "kill", "--signal", "SIGTERM", id); err != nil {
			t.Fatalf("ctr task kill: %v: %s", err, stderr)
		}
		waitTaskStatus(ctx, t, env, id, "STOPPED")
		// ctr task delete warns "task <id> exit with non-zero exit code N" (both versions).
		_, stderr, err := env.Ctr(ctx, "task", "delete", id)
		if err != nil {
			t.Fatalf("ctr task delete: %v: %s", err, stderr)
		}
		if !strings.Contains(stderr, "exit code 42") {
			t.Errorf("ctr task delete: stderr %q, want the exit code 42 of the workload's handler", stderr)
		}
		if !strings.Contains(output(), "got SIGTERM") {
			t.Errorf("the workload's log has %q, want \"got SIGTERM\"", output())
		}
	})
}

// taskStatus returns the STATUS column of `ctr task ls` for id ("" if not listed).
func taskStatus(ctx context.Context, env *harness.Env, id string) (string, error) {
	out, stderr, err := env.Ctr(ctx, "task", "ls")
	if err != nil {
		return "", fmt.Errorf("ctr task ls: %w: %s", err, stderr)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id {
			return f[2], nil
		}
	}
	return "", nil
}

// waitTaskStatus waits up to 30s until `ctr task ls` shows id with status.
func waitTaskStatus(ctx context.Context, t *testing.T, env *harness.Env, id, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := taskStatus(ctx, env, id)
		if err != nil {
			t.Fatal(err)
		}
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: status %q in ctr task ls, want %q", id, got, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// systemState is the State hcsemu reports for compute system id ("" if it has none).
func systemState(ctx context.Context, t *testing.T, env *harness.Env, id string) string {
	t.Helper()
	systems, err := env.ComputeSystems(ctx)
	if err != nil {
		t.Fatalf("enumerate compute systems: %v", err)
	}
	for _, s := range systems {
		if s.Id == id {
			return string(s.State)
		}
	}
	return ""
}

func testPauseResume(ctx context.Context, t *testing.T, env *harness.Env) {
	const id = "pause-ctr"
	if err := env.CtrRunDetached(ctx, id, "", nil, workload("sleep", "60")...); err != nil {
		t.Fatal(err)
	}
	defer removeWithCtr(ctx, t, env, id)
	waitTaskStatus(ctx, t, env, id, "RUNNING")
	client := env.Client(t)
	c, err := client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		ctr         string
		want        string // ctr task ls
		client      containerd.ProcessStatus
		systemState string // hcsemu
	}{
		{"pause", "PAUSED", containerd.Paused, "Paused"},
		{"resume", "RUNNING", containerd.Running, "Running"},
		{"pause", "PAUSED", containerd.Paused, "Paused"},
		{"resume", "RUNNING", containerd.Running, "Running"},
	}
	for _, s := range steps {
		if _, stderr, err := env.Ctr(ctx, "task", s.ctr, id); err != nil {
			t.Fatalf("ctr task %s: %v: %s", s.ctr, err, stderr)
		}
		if got, err := taskStatus(ctx, env, id); err != nil || got != s.want {
			t.Fatalf("after %s: ctr task ls says %q (%v), want %q", s.ctr, got, err, s.want)
		}
		if st, err := task.Status(ctx); err != nil || st.Status != s.client {
			t.Fatalf("after %s: client status %q (%v), want %q", s.ctr, st.Status, err, s.client)
		}
		if got := systemState(ctx, t, env, id); got != s.systemState {
			t.Fatalf("after %s: hcsemu says the system is %q, want %q", s.ctr, got, s.systemState)
		}
	}
	// Pausing twice is an invalid transition, named as such.
	if _, stderr, err := env.Ctr(ctx, "task", "pause", id); err != nil {
		t.Fatalf("ctr task pause: %v: %s", err, stderr)
	}
	if _, stderr, err := env.Ctr(ctx, "task", "pause", id); err == nil {
		t.Fatalf("second ctr task pause succeeded")
	} else if !strings.Contains(stderr, "paused") {
		t.Fatalf("second pause: stderr %q, want it to say the task is paused", stderr)
	}
	if _, stderr, err := env.Ctr(ctx, "task", "resume", id); err != nil {
		t.Fatalf("ctr task resume: %v: %s", err, stderr)
	}
}

func testPids(ctx context.Context, t *testing.T, env *harness.Env) {
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "pids", Args: workload("sleep", "60")})
	if err != nil {
		t.Fatal(err)
	}
	// A second process, as an exec that keeps running.
	spec, err := tk.Container.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pspec := *spec.Process
	pspec.Args, pspec.CommandLine = workload("sleep", "60"), ""
	sleeper, err := tk.Task.Exec(ctx, "sleeper", &pspec, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	execExit, err := sleeper.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Start(ctx); err != nil {
		t.Fatal(err)
	}

	procs, err := tk.Task.Pids(ctx)
	if err != nil {
		t.Fatalf("Pids: %v", err)
	}
	found := map[uint32]*options.ProcessDetails{}
	for _, p := range procs {
		var d *options.ProcessDetails
		if p.Info != nil {
			v, err := typeurl.UnmarshalAny(p.Info)
			if err != nil {
				t.Fatalf("pid %d: info of type %s: %v", p.Pid, p.Info.GetTypeUrl(), err)
			}
			var ok bool
			if d, ok = v.(*options.ProcessDetails); !ok {
				t.Fatalf("pid %d: info is %T, want ProcessDetails", p.Pid, v)
			}
		}
		found[p.Pid] = d
	}
	for _, want := range []struct {
		pid    uint32
		execID string
	}{{tk.Task.Pid(), ""}, {sleeper.Pid(), "sleeper"}} {
		d, ok := found[want.pid]
		if !ok {
			t.Fatalf("Pids = %v, missing pid %d (exec %q)", procs, want.pid, want.execID)
		}
		if d == nil {
			t.Fatalf("pid %d: no ProcessDetails", want.pid)
		}
		if d.ExecId != want.execID || d.ProcessId != want.pid || d.ImageName == "" {
			t.Errorf("pid %d: details %+v, want exec id %q and an image name", want.pid, d, want.execID)
		}
	}
	if err := sleeper.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := waitExit(t, "exec sleeper", execExit, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := sleeper.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	killAndWait(ctx, t, tk)
}

// metricsTable parses `ctr task metrics` table output (NAME VALUE lines) into a map.
func metricsTable(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

func testMetrics(ctx context.Context, t *testing.T, env *harness.Env) {
	const mb = 64
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "metrics", Args: workload("alloc", strconv.Itoa(mb), "60")})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := tk.WaitOutput(wctx, fmt.Sprintf("allocated %d MiB", mb)); err != nil {
		t.Fatal(err)
	}
	// hcsemu reads the memory figures from the container's cgroup. The kernel folds its per-CPU
	// memory statistics into memory.stat lazily (in batches, and every 2 s on Linux 6.x), so a
	// reading right after the allocation can be short by a few MiB (measured: 61.8 of 64 MiB,
	// once in ten runs). Read until the allocation shows, for at most 10 s; the assertions
	// below then judge the last reading.
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		o, stderr, err := env.Ctr(ctx, "task", "metrics", "metrics")
		if err != nil {
			t.Fatalf("ctr task metrics: %v: %s", err, stderr)
		}
		out = o
		ws, _ := strconv.ParseUint(metricsTable(out)["memory.private_working_set_bytes"], 10, 64)
		if ws >= mb<<20 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("ctr task metrics:\n%s", out)
	m := metricsTable(out)
	num := func(name string) uint64 {
		v, ok := m[name]
		if !ok {
			t.Fatalf("ctr task metrics has no %s:\n%s", name, out)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", name, v, err)
		}
		return n
	}
	if ws := num("memory.private_working_set_bytes"); ws < mb<<20 {
		t.Errorf("memory.private_working_set_bytes = %d, want at least %d after alloc %d", ws, mb<<20, mb)
	}
	if c := num("memory.commit_bytes"); c < mb<<20 {
		t.Errorf("memory.commit_bytes = %d, want at least %d", c, mb<<20)
	}
	if p := num("memory.commit_peak_bytes"); p < num("memory.commit_bytes") {
		t.Errorf("memory.commit_peak_bytes = %d < commit_bytes", p)
	}
	if cpu := num("cpu.total_runtime_ns"); cpu == 0 {
		t.Errorf("cpu.total_runtime_ns = 0 after touching %d MiB", mb)
	}
	if up := num("uptime_ns"); up == 0 {
		t.Errorf("uptime_ns = 0")
	}

	// The Go client decodes the same type.
	metric, err := tk.Task.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	if !strings.HasSuffix(metric.Data.GetTypeUrl(), "containerd.runhcs.stats.v1.Statistics") {
		t.Errorf("metrics type %q, want containerd.runhcs.stats.v1.Statistics", metric.Data.GetTypeUrl())
	}
	killAndWait(ctx, t, tk)
}

// cgroupValue reads a file of compute system id's cgroup under the environment's hcsemu (cgroup
// v1, /sys/fs/cgroup/<controller>/hcsemu/<daemon instance>/<system>).
func cgroupValue(t *testing.T, env *harness.Env, controller, id, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.HCSEmuCgroup(controller), id, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func testUpdate(ctx context.Context, t *testing.T, env *harness.Env) {
	const id = "update"
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "60")})
	if err != nil {
		t.Fatal(err)
	}
	// The control for "limit enforced" below: without a limit, the allocation succeeds.
	if res, err := execIn(ctx, t, env, tk, "hog-unlimited", workload("alloc", "256")...); err != nil {
		t.Fatal(err)
	} else if res.code != 0 || !strings.Contains(res.stdout, "allocated 256 MiB") {
		t.Fatalf("alloc 256 MiB without a limit: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	u64 := func(v uint64) *uint64 { return &v }
	u16 := func(v uint16) *uint16 { return &v }
	hostCPUs := runtime.NumCPU()
	steps := []struct {
		name      string
		res       specs.WindowsResources
		memLimit  string // memory.limit_in_bytes, "" not checked
		cfsQuota  string // cpu.cfs_quota_us, "" not checked
		cpuShares string // cpu.shares, "" not checked
	}{
		{"memory", specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(256 << 20)}}, "268435456", "", ""},
		// Maximum is in 1/10000ths of the host's processors: half of them.
		{"cpu maximum", specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000)}}, "", strconv.Itoa(5000 * hostCPUs * 100000 / 10000), ""},
		{"cpu count", specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(1)}}, "", "100000", ""},
		{"cpu shares and memory", specs.WindowsResources{
			CPU:    &specs.WindowsCPUResources{Shares: u16(300)},
			Memory: &specs.WindowsMemoryResources{Limit: u64(128 << 20)},
		}, "134217728", "", "300"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := tk.Task.Update(ctx, containerd.WithResources(&s.res)); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if s.memLimit != "" {
				if got := cgroupValue(t, env, "memory", id, "memory.limit_in_bytes"); got != s.memLimit {
					t.Errorf("memory.limit_in_bytes = %s, want %s", got, s.memLimit)
				}
			}
			if s.cfsQuota != "" {
				if got := cgroupValue(t, env, "cpu", id, "cpu.cfs_quota_us"); got != s.cfsQuota {
					t.Errorf("cpu.cfs_quota_us = %s, want %s", got, s.cfsQuota)
				}
			}
			if s.cpuShares != "" {
				if got := cgroupValue(t, env, "cpu", id, "cpu.shares"); got != s.cpuShares {
					t.Errorf("cpu.shares = %s, want %s", got, s.cpuShares)
				}
			}
		})
	}

	t.Run("limit enforced", func(t *testing.T) {
		// 128 MiB is the limit now: allocating 256 MiB in an exec must fail (hcsemu reports the
		// OOM kill, a SIGKILL, as terminated: exit code 1).
		res, err := execIn(ctx, t, env, tk, "hog", workload("alloc", "256")...)
		if err != nil {
			t.Fatal(err)
		}
		if res.code == 0 {
			t.Fatalf("alloc 256 MiB under a 128 MiB limit exited 0: %q", res.stdout)
		}
		t.Logf("alloc 256 MiB under a 128 MiB limit: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	})

	refused := []struct {
		name, want string
		res        specs.WindowsResources
	}{
		{"cpu maximum too large", "windows.resources.cpu.maximum=20000", specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(20000)}}},
		{"memory below 1 MiB", "windows.resources.memory.limit=1000", specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(1000)}}},
		{"count with shares", "count (1) cannot be combined", specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(1), Shares: u16(10)}}},
	}
	for _, r := range refused {
		t.Run("refused: "+r.name, func(t *testing.T) {
			err := tk.Task.Update(ctx, containerd.WithResources(&r.res))
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Fatalf("Update: %v; want an error naming %q", err, r.want)
			}
			if got := cgroupValue(t, env, "memory", id, "memory.limit_in_bytes"); got != "134217728" {
				t.Errorf("memory.limit_in_bytes = %s after a refused update, want 134217728 unchanged", got)
			}
		})
	}
	killAndWait(ctx, t, tk)
}

func testDelete(ctx context.Context, t *testing.T, env *harness.Env) {
	const id = "delete-ctr"
	if err := env.CtrRunDetached(ctx, id, "", nil, workload("sleep", "60")...); err != nil {
		t.Fatal(err)
	}
	defer removeWithCtr(ctx, t, env, id)
	waitTaskStatus(ctx, t, env, id, "RUNNING")
	c, err := env.Client(t).LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := env.SnapshotMounts(ctx, t, c)
	if err != nil || len(mounts) != 1 {
		t.Fatalf("snapshot mounts of %s: %v, %v", id, mounts, err)
	}
	scratch := mounts[0].Source
	if len(harness.MountsUnder(scratch)) == 0 {
		t.Fatalf("no mount under the scratch layer %s of a running container", scratch)
	}

	// A running task is not deleted without force.
	if _, stderr, err := env.Ctr(ctx, "task", "delete", id); err == nil {
		t.Fatal("ctr task delete of a running task succeeded")
	} else if !strings.Contains(stderr, "running") {
		t.Errorf("ctr task delete of a running task: stderr %q, want it to say it is running", stderr)
	}
	if _, stderr, err := env.Ctr(ctx, "task", "delete", "--force", id); err != nil {
		t.Fatalf("ctr task delete --force: %v: %s", err, stderr)
	}
	if got, err := taskStatus(ctx, env, id); err != nil || got != "" {
		t.Fatalf("after delete ctr task ls shows %s as %q (%v)", id, got, err)
	}
	if got := systemState(ctx, t, env, id); got != "" {
		t.Errorf("after delete hcsemu still has compute system %s (%s)", id, got)
	}
	if left := harness.MountsUnder(scratch); len(left) > 0 {
		t.Errorf("after delete still mounted: %v", left)
	}
	// Deleting again is NotFound, not a crash.
	if _, stderr, err := env.Ctr(ctx, "task", "delete", id); err == nil || !strings.Contains(stderr, "not found") {
		t.Errorf("second ctr task delete: %v, stderr %q; want not found", err, stderr)
	}
	if _, stderr, err := env.Ctr(ctx, "container", "delete", id); err != nil {
		t.Fatalf("ctr container delete: %v: %s", err, stderr)
	}
}

// withRawSpec replaces the container's spec with the JSON of the spec the options make, passed
// through patch: values the Go types cannot hold (a negative count) reach the shim as they
// would from another client.
func withRawSpec(patch func(map[string]any), opts ...oci.SpecOpts) containerd.NewContainerOpts {
	return func(ctx context.Context, client *containerd.Client, c *containers.Container) error {
		spec, err := oci.GenerateSpecWithPlatform(ctx, client, harness.Platform, c, opts...)
		if err != nil {
			return err
		}
		b, err := json.Marshal(spec)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		patch(m)
		if b, err = json.Marshal(m); err != nil {
			return err
		}
		typed, err := typeurl.MarshalAny(spec)
		if err != nil {
			return err
		}
		c.Spec = &anypb.Any{TypeUrl: typed.GetTypeUrl(), Value: b}
		return nil
	}
}

// setPath sets a value at a dotted path of a JSON object, making objects on the way.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func testBadSpec(ctx context.Context, t *testing.T, env *harness.Env) {
	client := env.Client(t)
	img, err := harness.WindowsImage(ctx, client, env.Image)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		set   map[string]any // dotted spec path → value
		wants []string       // all must be in the error
	}{
		{"negative cpu count", map[string]any{"windows.resources.cpu.count": -1}, []string{"cpu.count", "-1"}},
		{"zero cpu count", map[string]any{"windows.resources.cpu.count": 0}, []string{"windows.resources.cpu.count=0"}},
		{"cpu maximum too large", map[string]any{"windows.resources.cpu.maximum": 10001}, []string{"windows.resources.cpu.maximum=10001"}},
		{"negative memory limit", map[string]any{"windows.resources.memory.limit": -5}, []string{"memory.limit", "-5"}},
		{"memory below 1 MiB", map[string]any{"windows.resources.memory.limit": 4096}, []string{"windows.resources.memory.limit=4096"}},
		{"count with maximum", map[string]any{"windows.resources.cpu.count": 1, "windows.resources.cpu.maximum": 100}, []string{"windows.resources.cpu", "cannot be combined"}},
		{"no windows section", map[string]any{"windows": nil}, []string{"Windows containers"}},
		// Hostile input (issue 15): each refused naming the field, nothing created.
		{"malformed resource annotation", map[string]any{"annotations": map[string]any{"io.microsoft.container.memory.sizeinmb": "lots"}},
			[]string{"io.microsoft.container.memory.sizeinmb", `"lots"`}},
		{"annotation overflowing its bits", map[string]any{"annotations": map[string]any{"io.microsoft.container.processor.count": "99999999999999999999"}},
			[]string{"io.microsoft.container.processor.count"}},
		{"mount of another type", map[string]any{"mounts": []any{map[string]any{"type": "tmpfs", "source": "tmpfs", "destination": `C:\\data`}}},
			[]string{"mounts[0].type", "tmpfs"}},
		{"mount without a source", map[string]any{"mounts": []any{map[string]any{"destination": `C:\\data`}}},
			[]string{"mounts[0].source"}},
		{"environment entry without =", map[string]any{"process.env": []any{"PATH=C:\\Windows", "NOT-A-VARIABLE"}},
			[]string{"process.env[1]", "NOT-A-VARIABLE"}},
		{"network namespace that is a path", map[string]any{"windows.network.networkNamespace": `..\\..\\etc`},
			[]string{"windows.network.networkNamespace"}},
		{"credential spec that is not JSON", map[string]any{"windows.credentialSpec": "{not json"},
			[]string{"windows.credentialSpec"}},
		// Huge environment: Windows allows 32767 characters per variable (and no limit on the
		// block as a whole since Vista, so a block of many variables is not refused); see
		// internal/oci/process.go for the sources.
		{"environment variable over 32767 characters", map[string]any{"process.env": []any{"PATH=C:\\Windows", "HUGE=" + strings.Repeat("x", 40000)}},
			[]string{"process.env[1] (HUGE)", "32767"}},
		// Invalid UTF-16: strings with no UTF-16 form, sent as raw JSON (encoding/json would
		// otherwise replace them with U+FFFD on either side).
		{"unpaired surrogate in an argument", map[string]any{"process.args": json.RawMessage(`["C:\\workload\\workload.exe","\ud800"]`)},
			[]string{"process.args[1]", "UTF-16"}},
		{"bytes that are not UTF-8 in the environment", map[string]any{"process.env": json.RawMessage("[\"A=1\",\"B=\xff\xfe\"]")},
			[]string{"process.env[1]", "UTF-16"}},
		{"unpaired low surrogate in the working folder", map[string]any{"process.cwd": json.RawMessage(`"C:\\\udc00"`)},
			[]string{"process.cwd", "UTF-16"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("badspec-%d", i)
			patch := func(m map[string]any) {
				for p, v := range tt.set {
					if v == nil {
						delete(m, p)
						continue
					}
					setPath(m, p, v)
				}
			}
			c, err := client.NewContainer(ctx, id,
				containerd.WithImage(img),
				containerd.WithSnapshotter(harness.Snapshotter),
				containerd.WithNewSnapshot(id+"-rootfs", img),
				containerd.WithRuntime(harness.Runtime, nil),
				withRawSpec(patch, oci.WithDefaultSpecForPlatform(harness.Platform), oci.WithImageConfigArgs(img, workload("echo", "never"))),
			)
			if err != nil {
				t.Fatalf("create container: %v", err)
			}
			defer func() {
				if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
					t.Errorf("delete container %s: %v", id, err)
				}
			}()
			mounts, err := env.SnapshotMounts(ctx, t, c)
			if err != nil || len(mounts) != 1 {
				t.Fatalf("snapshot mounts: %v, %v", mounts, err)
			}
			task, err := c.NewTask(ctx, cio.NullIO)
			if err == nil {
				_, _ = task.Delete(ctx, containerd.WithProcessKill)
				t.Fatalf("NewTask with %v succeeded", tt.set)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewTask error %q does not name %q", err, w)
				}
			}
			// Nothing left behind: no compute system, no mount of the rootfs.
			if got := systemState(ctx, t, env, id); got != "" {
				t.Errorf("refused create left compute system %s (%s)", id, got)
			}
			if left := harness.MountsUnder(mounts[0].Source); len(left) > 0 {
				t.Errorf("refused create left mounts %v", left)
			}
		})
	}
}
