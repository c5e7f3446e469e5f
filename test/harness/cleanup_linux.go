package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
)

// Main runs the tests of a package that uses the harness and cleans every live environment up
// when the test binary gets SIGINT or SIGTERM (t.Cleanup does not run then). Use it as
//
//	func TestMain(m *testing.M) { harness.Main(m) }
func Main(m *testing.M) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var interrupted atomic.Bool
	handled := make(chan struct{})
	go func() {
		s := <-sigs
		interrupted.Store(true)
		fmt.Fprintf(os.Stderr, "harness: %v: cleaning up\n", s)
		envsMu.Lock()
		live := make([]*Env, 0, len(envs))
		for e := range envs {
			live = append(live, e)
		}
		envsMu.Unlock()
		for _, e := range live {
			e.Close(true)
		}
		RemoveBuilds()
		close(handled)
		os.Exit(130)
	}()
	code := m.Run()
	if interrupted.Load() {
		// The tests may end because the cleanup killed what they waited for; the run was
		// still interrupted, and the handler exits when its cleanup is done.
		<-handled
		os.Exit(130)
	}
	RemoveBuilds()
	os.Exit(code)
}

// Close tears the environment down: containers, daemons, stray processes, mounts and the
// temporary root. It runs once; a concurrent or later call waits for that one to finish (the
// signal handler of Main and a test's cleanup may both call it). It tries every step whatever
// fails and reports problems on stderr. With showLogs it first prints the tails of the daemon logs.
func (e *Env) Close(showLogs bool) {
	e.closeOnce.Do(func() { e.close(showLogs) })
}

func (e *Env) close(showLogs bool) {
	// A snapshot: Close may run from Main's signal handler while New is still starting daemons;
	// one started after this is still found by killUnder (its command line names the root).
	e.mu.Lock()
	daemons := append([]*daemon(nil), e.daemons...)
	clients := append([]*containerd.Client(nil), e.clients...)
	e.mu.Unlock()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "harness cleanup: "+format+"\n", args...) }

	if showLogs {
		fmt.Fprintf(os.Stderr, "harness: daemon logs (root %s, containerd %s):\n%s", e.Root, e.ContainerdVersion, e.LogTails(60))
	}

	// Containers first, through containerd, so the shim, the snapshotter and hcsemu release what
	// they hold the normal way. Bounded: a stuck shim must not stall the cleanup.
	if e.daemonRunning("containerd") {
		ctx, cancel := context.WithTimeout(Context(context.Background()), 20*time.Second)
		if err := e.removeContainers(ctx); err != nil {
			logf("removing containers: %v", err)
		}
		cancel()
	}
	for _, c := range clients {
		c.Close()
	}
	// With every container deleted the normal way, nothing should be mounted any more (the shim
	// unmounts a container's volume when its task is deleted; hcsemu's own host network
	// namespace stays until hcsemu stops). Say so if something is: it is a bug of the layer
	// above, even though the forced cleanup below removes it.
	if left := e.TaskMountsUnderRoot(); len(left) > 0 {
		logf("mounted after all containers were deleted: %q", left)
	}

	// Daemons in reverse order of start: containerd, the snapshotter, hcsemu.
	for i := len(daemons) - 1; i >= 0; i-- {
		daemons[i].stop(logf)
	}
	// Whatever is left with a foot in the root: shims (their cwd is a bundle under the
	// containerd state), container processes (chrooted into volumes under it), strays.
	killUnder(e.Root, logf)
	unmountUnder(e.Root, logf)
	if err := os.RemoveAll(e.Root); err != nil {
		logf("remove %s: %v", e.Root, err)
	}
	envsMu.Lock()
	delete(envs, e)
	envsMu.Unlock()
}

// Leftovers describes what is still there of the environment after Close: processes, mounts,
// the root folder. Empty means nothing.
func (e *Env) Leftovers() []string {
	var left []string
	for _, pid := range processesUnder(e.Root) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	for _, m := range mountsUnder(e.Root) {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat(e.Root); err == nil {
		left = append(left, "folder "+e.Root)
	}
	return left
}

func (e *Env) daemonRunning(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.daemons {
		if d.name == name {
			select {
			case <-d.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// removeContainers kills and deletes every task and container in Namespace, with their snapshots.
func (e *Env) removeContainers(ctx context.Context) error {
	c, err := containerd.New(e.Address, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	cs, err := c.Containers(ctx)
	if err != nil {
		return err
	}
	var errs []string
	for _, ctr := range cs {
		if task, err := ctr.Task(ctx, nil); err == nil {
			if st, err := task.Wait(ctx); err == nil {
				_ = task.Kill(ctx, syscall.SIGKILL)
				select {
				case <-st:
				case <-time.After(5 * time.Second):
				}
			}
			if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil {
				errs = append(errs, fmt.Sprintf("task %s: %v", ctr.ID(), err))
			}
		}
		if err := ctr.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			errs = append(errs, fmt.Sprintf("container %s: %v", ctr.ID(), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// stop sends SIGTERM to the daemon's process group, and SIGKILL if it has not exited in 10s.
func (d *daemon) stop(logf func(string, ...any)) {
	select {
	case <-d.done:
		return
	default:
	}
	pgid := d.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		logf("%s (pid %d) did not stop on SIGTERM; killing it", d.name, pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-d.done
	}
	// Anything else left in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// killUnder SIGKILLs every process whose command line, working directory or root is inside root,
// repeating until none is left (a dying shim may leave children) or 10s pass.
func killUnder(root string, logf func(string, ...any)) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := processesUnder(root)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logf("processes still under %s after SIGKILL: %v", root, pids)
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func processesUnder(root string) []int {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	inside := func(p string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", ent.Name())
		if st, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil && zombie(st) {
			continue
		}
		match := false
		for _, link := range []string{"cwd", "root"} {
			if p, err := os.Readlink(filepath.Join(dir, link)); err == nil && inside(p) {
				match = true
			}
		}
		if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && strings.Contains(string(cmdline), root) {
			match = true
		}
		if match {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether a /proc/<pid>/stat line is of a zombie, which SIGKILL cannot remove.
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// unmountUnder unmounts every mount point inside root, deepest first, lazily if a normal unmount
// is refused.
func unmountUnder(root string, logf func(string, ...any)) {
	for attempt := 0; attempt < 3; attempt++ {
		points := mountsUnder(root)
		if len(points) == 0 {
			return
		}
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil {
				if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
					logf("unmount %s: %v", p, err)
				}
			}
		}
	}
	if left := mountsUnder(root); len(left) > 0 {
		logf("still mounted under %s: %v", root, left)
	}
}

// mountsUnder lists the mount points inside root from /proc/self/mountinfo, deepest first.
func mountsUnder(root string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == root || strings.HasPrefix(p, root+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, …) of mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
