package harness

// Helpers for the task, fault and storage suites: long-running containers through the Go client,
// detached ctr runs, restarting a daemon in place, finding a task's shim, and looking at what
// hcsemu and the kernel hold (compute systems, mounts). Additive to the rest of the package.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// TaskRun describes a container StartTask creates and leaves running.
type TaskRun struct {
	ID string
	// Image is a reference; empty means the default test image.
	Image string
	// Args replace the image's command; empty runs its default.
	Args []string
	// Stdin, if set, is the container's stdin.
	Stdin io.Reader
	// Terminal runs the init process on a console (EmulateConsole): stdout only, no stderr.
	Terminal bool
	// SpecOpts are applied after the Windows default spec and the image config.
	SpecOpts []oci.SpecOpts
	// RuntimeOptions are the shim's runtime options (a *options.Options), or nil.
	RuntimeOptions any
}

// Task is a container with a started task, made by StartTask. Its output accumulates in
// buffers that Stdout and Stderr read at any time.
type Task struct {
	Container containerd.Container
	Task      containerd.Task
	// Exit delivers the init process's exit status (containerd's Task.Wait, set up before Start).
	Exit <-chan containerd.ExitStatus

	stdout, stderr *SyncBuffer
}

// Stdout is what the init process wrote to stdout (or to its console) so far.
func (t *Task) Stdout() string { return t.stdout.String() }

// Stderr is what the init process wrote to stderr so far.
func (t *Task) Stderr() string { return t.stderr.String() }

// WaitOutput waits until the init process's stdout contains s, or ctx ends.
func (t *Task) WaitOutput(ctx context.Context, s string) error {
	for !strings.Contains(t.Stdout(), s) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %s: %q not in its stdout %q (stderr %q): %w", t.Container.ID(), s, t.Stdout(), t.Stderr(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// SyncBuffer is a bytes.Buffer safe for a writer (a stdio copy) and readers (the test polling
// it).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits until the buffer holds want, or d passes.
func (s *SyncBuffer) WaitFor(want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%q not in the output %q after %v", want, s.String(), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// ExitCode waits for an exit status from ch (a task's or process's Wait), at most d, and
// returns its code.
func ExitCode(ch <-chan containerd.ExitStatus, d time.Duration) (uint32, error) {
	select {
	case st := <-ch:
		code, _, err := st.Result()
		return code, err
	case <-time.After(d):
		return 0, fmt.Errorf("no exit within %v", d)
	}
}

// StartTask creates a container with containerd's Go client (Windows spec, wcow snapshot, the
// runhcs runtime), creates and starts its task, and returns it running. A cleanup registered
// on t kills and deletes the task (if still there) and deletes the container and its snapshot;
// a test that deletes them itself makes that cleanup a no-op.
func (e *Env) StartTask(ctx context.Context, t testing.TB, r TaskRun) (*Task, error) {
	t.Helper()
	ctx = Context(ctx)
	client := e.Client(t)
	img, err := e.windowsImage(ctx, client, r.Image)
	if err != nil {
		return nil, err
	}
	var specOpts []oci.SpecOpts
	if r.Terminal {
		specOpts = append(specOpts, oci.WithTTY)
	}
	c, err := NewContainer(ctx, client, r.ID, img, r.Args, append(specOpts, r.SpecOpts...), r.RuntimeOptions)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.removeContainer(t, r.ID) })

	tk := &Task{Container: c, stdout: &SyncBuffer{}, stderr: &SyncBuffer{}}
	opts := []cio.Opt{cio.WithStreams(r.Stdin, tk.stdout, tk.stderr), cio.WithFIFODir(filepath.Join(e.Root, "fifo"))}
	if r.Terminal {
		opts = append(opts, cio.WithTerminal)
	}
	task, err := c.NewTask(ctx, cio.NewCreator(opts...))
	if err != nil {
		return nil, fmt.Errorf("create task %s: %w", r.ID, err)
	}
	tk.Task = task
	if tk.Exit, err = task.Wait(ctx); err != nil {
		return nil, fmt.Errorf("wait task %s: %w", r.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("start task %s: %w", r.ID, err)
	}
	return tk, nil
}

// removeContainer kills and deletes a container's task and deletes the container with its
// snapshot; what is already gone is fine. It uses a client of its own, dialed anew, so it works
// after containerd was restarted.
func (e *Env) removeContainer(t testing.TB, id string) {
	t.Helper()
	if !e.daemonRunning(DaemonContainerd) {
		return // the environment is already gone
	}
	ctx, cancel := context.WithTimeout(Context(context.Background()), 30*time.Second)
	defer cancel()
	c, err := containerd.New(e.Address, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(5*time.Second))
	if err != nil {
		t.Logf("cleanup of container %s: %v", id, err)
		return
	}
	defer c.Close()
	ctr, err := c.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("cleanup: load container %s: %v", id, err)
		return
	}
	if task, err := ctr.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("cleanup: delete task %s: %v", id, err)
		}
	}
	if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		t.Errorf("cleanup: delete container %s: %v", id, err)
	}
}

// CtrRunDetached runs `ctr run -d` of the test image (or image) with the runhcs runtime and the
// wcow snapshotter: the container keeps running after ctr returns. Remove it with `ctr task
// kill`/`ctr task delete`/`ctr container delete` (Close removes whatever is left).
func (e *Env) CtrRunDetached(ctx context.Context, id, image string, extra []string, args ...string) error {
	if image == "" {
		image = e.Image
	}
	full := []string{"run", "-d", "--runtime", Runtime, "--snapshotter", Snapshotter, "--platform", Platform}
	full = append(full, extra...)
	full = append(full, image, id)
	full = append(full, args...)
	_, stderr, err := e.ctr(ctx, e.Bin.RunCtr, nil, full...)
	if err != nil {
		return fmt.Errorf("ctr run -d %s: %w: %s", id, err, strings.TrimSpace(dropCtrWarnings(stderr)))
	}
	return nil
}

// Daemon names for RestartDaemon, as New starts them.
const (
	DaemonHCSEmu      = "hcsemu"
	DaemonSnapshotter = "snapshotter"
	DaemonContainerd  = "containerd"
)

// RestartDaemon stops the named daemon with sig (SIGTERM waits up to 10s, then SIGKILL; SIGKILL
// kills its whole process group at once), starts it again with the same command line,
// environment and log file (appended to), and waits until it answers on its socket. Processes
// the old one started outside its process group (shims, which containerd puts in their own
// groups) are left alone.
func (e *Env) RestartDaemon(ctx context.Context, name string, sig syscall.Signal) error {
	e.mu.Lock()
	var old *daemon
	idx := -1
	for i, d := range e.daemons {
		if d.name == name {
			old, idx = d, i
		}
	}
	e.mu.Unlock()
	if old == nil {
		return fmt.Errorf("restart %s: no such daemon in this environment", name)
	}
	var socket string
	switch name {
	case DaemonHCSEmu:
		socket = e.HCSEmuAddress
	case DaemonSnapshotter:
		socket = e.SnapshotterAddress
	case DaemonContainerd:
		socket = e.Address
	default:
		return fmt.Errorf("restart %s: unknown daemon", name)
	}

	pid := old.cmd.Process.Pid
	_ = syscall.Kill(pid, sig)
	select {
	case <-old.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-old.done
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	// A daemon killed outright leaves its socket file; a dial fails on it until the new one
	// listens, and the daemons remove a stale file before they listen.

	logf, err := os.OpenFile(old.log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "===== harness: %s restarted after %v =====\n", name, sig)
	cmd := exec.Command(old.cmd.Path, old.cmd.Args[1:]...)
	cmd.Env = old.cmd.Env
	cmd.Dir = old.cmd.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, log: old.log, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.mu.Lock()
	e.daemons[idx] = d
	e.mu.Unlock()
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%s exited after its restart: %v\n%s", name, d.err, tail(d.log, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen on %s after its restart\n%s", name, socket, tail(d.log, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ShimPids returns the pids of the runhcs shims serving container id (normally one: the
// serving shim; the `start` and `delete` actions are short-lived and not counted).
func (e *Env) ShimPids(id string) []int { return e.ServingShims(filepath.Base(e.Bin.Shim), id) }

// ServingShims returns the pids of the processes of the shim binary (a base name: runhcs's, or
// another runtime's under the same containerd) that serve container id in this environment:
// their command line names the root (containerd's address is under it) and has `-id <id>`, and
// they are not a short-lived `start` or `delete` action.
func (e *Env) ServingShims(binary, id string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != binary || !strings.Contains(string(b), e.Root) {
			continue
		}
		match, action := false, false
		for i, a := range args {
			if (a == "-id" || a == "--id") && i+1 < len(args) && args[i+1] == id {
				match = true
			}
			if a == "start" || a == "delete" {
				action = true
			}
		}
		if match && !action {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ComputeSystems lists the compute systems hcsemu of this environment holds, through
// internal/hcs over a connection of its own.
func (e *Env) ComputeSystems(ctx context.Context) ([]schema2.Properties, error) {
	api, err := emuclient.DialHCS(e.HCSEmuAddress)
	if err != nil {
		return nil, err
	}
	defer api.Close()
	return hcs.NewClient(api).EnumerateComputeSystems(ctx, nil)
}

// MountsUnder lists the mount points (this process's mount namespace, /proc/self/mountinfo)
// at or below path, deepest first.
func MountsUnder(path string) []string { return mountsUnder(path) }

// SnapshotMounts returns the mounts of a container's rootfs snapshot as the wcow snapshotter
// gives them (windows-layer: Source is the scratch folder, parentLayerPaths the parents).
func (e *Env) SnapshotMounts(ctx context.Context, t testing.TB, c containerd.Container) ([]mount.Mount, error) {
	t.Helper()
	ctx = Context(ctx)
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.SnapshotKey == "" {
		return nil, errors.New("container " + c.ID() + " has no snapshot")
	}
	return e.Client(t).SnapshotService(info.Snapshotter).Mounts(ctx, info.SnapshotKey)
}

// HostNetnsPath is the emulated Windows host's network namespace of this environment's hcsemu
// (a bind mount that lives as long as the daemon; see internal/hcsemu/layout).
func (e *Env) HostNetnsPath() string { return layout.HostNetns(e.HCSEmuRoot()) }

// TaskMountsUnderRoot lists the mounts under the environment's root other than the running
// hcsemu's own: its host namespace and its utility VMs' folder (<root>/vms, made a shared
// mount once for the first VM and kept while hcsemu runs; a VM's own mounts are below it and
// are listed). What is listed is what tasks, VMs, layers and HNS objects left mounted.
func (e *Env) TaskMountsUnderRoot() []string {
	var out []string
	vms := layout.VMsDir(e.HCSEmuRoot())
	for _, m := range mountsUnder(e.Root) {
		if m != e.HostNetnsPath() && m != vms {
			out = append(out, m)
		}
	}
	return out
}
