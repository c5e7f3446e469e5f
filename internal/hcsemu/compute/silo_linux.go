package compute

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// A process-isolated container is a server silo on Windows: its processes see only the silo's
// processes (Get-Process in a Windows Server Core container lists the PowerShell it runs in and
// the system's usual processes, in a system session 0 and a user session: see
// https://airdesk.com/2017/10/windows-containers-container-properties/; never the host's or
// another container's), and the
// silo lives until HCS terminates or shuts it down, whatever its processes do: when the first
// process exits, the others (a `docker exec`'s, CRI ExecSync's) go on running. hcsemu gives each
// running process-isolated container a Linux PID namespace of its own, whose PID 1 is a small
// "silo init" (hcsemu re-executed, like the VM init of vminit_linux.go; Reexec in
// reexec_linux.go runs it) that stands for the
// silo's system processes: it reaps orphans and lives until the system stops, so no workload
// process is PID 1 and none takes the others with it when it exits. The init mounts the
// namespace's procfs at the container's C:\proc, inside its chroot, which is where the test
// workload's Get-Process stand-in reads the processes it lists.
//
// Differences from Windows (the cost of the emulation): the container sees its processes under
// the namespace's PIDs, while HCS (and so containerd) reports the host's PID of a process; on
// Windows a silo shares the host's PID space and both are the same. And C:\proc is a folder the
// container sees (removed when the container stops, so it does not stay in its scratch layer).
//
// The init runs outside the container's cgroups: the container's statistics and process count
// are its processes', as they were before. When the system stops, the daemon asks it to end
// (SIGTERM); when the daemon dies, its Pdeathsig asks the same. It then unmounts C:\proc,
// removes the folder if hcsemu made it, and exits, and its death kills every process left in
// the namespace.

const (
	// siloInitEnv is set in the silo init's environment: "made" when hcsemu created C:\proc
	// for it (and it removes the folder when it ends), "kept" when the folder was there.
	siloInitEnv = "HCSEMU_SILO_INIT"
	// siloInitName is the init's argv[0], the name Get-Process shows for it. Assumption: smss
	// (the Session Manager, which starts every Windows session and its system processes) is
	// among the silo's system processes Get-Process lists, as on a Windows host.
	siloInitName = "smss"
	// siloProcDir is the folder of the container's C:\ where its procfs is mounted.
	siloProcDir = "proc"
)

// runSiloInit is the silo init: fd 3 is where it says "ready" (or "error: …"), fd 4 the
// container's C:\ (the volume's root), whose empty "proc" folder it mounts the namespace's
// procfs on. On SIGTERM (the daemon stopping the container, or the daemon's death: it is the
// init's Pdeathsig) it unmounts the procfs, removes the folder when siloInitEnv says hcsemu made
// it, and exits, which kills every process left in the namespace. So a container's C:\proc
// never outlives its container, not even a killed daemon.
func runSiloInit(made bool) int {
	ready := os.NewFile(3, "ready")
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(ready, "error: %s\n", msg)
		ready.Close()
		fmt.Fprintln(os.Stderr, "hcsemu silo init:", msg)
		return 1
	}
	if os.Getpid() != 1 {
		return fail("not PID 1 of a new PID namespace (pid %d)", os.Getpid())
	}
	const root = 4
	// Handled from the start, so that a stop while it starts still cleans up.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM)
	removeDir := func() {
		if made {
			_ = unix.Unlinkat(root, siloProcDir, unix.AT_REMOVEDIR)
		}
	}
	// Opened relative to the volume's root, never following a link, and mounted on the open
	// folder: the path is inside a container's volume. procfs shows the PID namespace of the
	// process that mounts it: this one's.
	dir, err := unix.Openat(root, siloProcDir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		removeDir()
		return fail("open C:\\%s: %v", siloProcDir, err)
	}
	err = unix.Mount("proc", "/proc/self/fd/"+strconv.Itoa(dir), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	unix.Close(dir)
	if err != nil {
		removeDir()
		return fail("mount the container's procfs: %v", err)
	}
	// Opened again, the path ends in the procfs: that descriptor names the mount from now on.
	proc, err := unix.Openat(root, siloProcDir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	var st unix.Statfs_t
	if err == nil {
		err = unix.Fstatfs(proc, &st)
	}
	if err != nil || st.Type != unix.PROC_SUPER_MAGIC {
		// Not what was mounted: the folder changed under it. The mount stays on the folder.
		return fail("C:\\%s is not the procfs just mounted there (%v)", siloProcDir, err)
	}
	fmt.Fprintln(ready, "ready")
	ready.Close()
	for sig := range sigs {
		if sig == syscall.SIGTERM {
			break
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	if err := unix.Unmount("/proc/self/fd/"+strconv.Itoa(proc), unix.MNT_DETACH); err != nil {
		fmt.Fprintf(os.Stderr, "hcsemu silo init: unmount C:\\%s: %v\n", siloProcDir, err)
		return 1
	}
	unix.Close(proc)
	removeDir()
	return 0
}

// silo is a running process-isolated container's PID namespace.
type silo struct {
	init  *os.Process
	done  chan struct{} // closed when init has been reaped
	code  int           // init's exit code, once done
	pid   *os.File      // the namespace, for the spawner
	ready *os.File      // where the init says it is ready; closed once read
	root  *os.Root      // the container's volume, where the init mounts C:\proc
	made  bool          // hcsemu made C:\proc for it
}

// startSiloLocked starts the silo init of a process-isolated container and waits until its
// procfs is mounted.
func (s *system) startSiloLocked(ctx context.Context) error {
	fail := func(format string, args ...any) error {
		return hresult.Errorf(computecore.E_FAIL, "start of compute system %q: "+format, append([]any{s.id}, args...)...)
	}
	made := false
	fi, err := s.vol.root.Lstat(siloProcDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.vol.root.Mkdir(siloProcDir, 0o555); err != nil {
			return fail("create C:\\%s: %v", siloProcDir, err)
		}
		made = true
	case err != nil:
		return fail("C:\\%s: %v", siloProcDir, err)
	case !fi.IsDir():
		// An image's own file of that name: not hidden, and not replaced. Assumption: no
		// Windows image relies on C:\proc; such a container does not start.
		return fail("C:\\%s exists and is not a folder; hcsemu mounts the container's process list there", siloProcDir)
	default:
		// Mounting over a folder with files would hide them from the container.
		if d, err := s.vol.root.Open(siloProcDir); err == nil {
			names, _ := d.Readdirnames(1)
			d.Close()
			if len(names) > 0 {
				return fail("C:\\%s is not empty; hcsemu mounts the container's process list there", siloProcDir)
			}
		}
	}
	sl, err := s.spawnSiloInit(made)
	if err != nil {
		if made {
			_ = s.vol.root.Remove(siloProcDir)
		}
		return fail("start its silo init: %v", err)
	}
	go s.watchSilo(sl)
	if err := s.waitSiloReady(ctx, sl); err != nil {
		sl.close(ctx, s.id)
		return err
	}
	s.silo = sl
	return nil
}

func (s *system) spawnSiloInit(made bool) (*silo, error) {
	root, err := s.vol.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find hcsemu: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		r.Close()
		return nil, err
	}
	defer devNull.Close()
	mode := "kept"
	if made {
		mode = "made"
	}
	attr := &os.ProcAttr{
		Dir:   "/",
		Env:   []string{siloInitEnv + "=" + mode, "PATH=/usr/bin:/bin"},
		Files: []*os.File{devNull, devNull, os.Stderr, w, root},
		Sys: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID,
			// The daemon's death (see spawner) asks the init to clean up and end the silo.
			Pdeathsig: syscall.SIGTERM,
			Setpgid:   true,
		},
	}
	// Outside the container's cgroups (no statistics of its own) and network namespace.
	p, err := s.e.sp.spawn(nil, nil, self, []string{siloInitName}, attr)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &silo{init: p, done: make(chan struct{}), ready: r, root: s.vol.root, made: made}, nil
}

// waitSiloReady waits for the init's "ready" and opens its PID namespace.
func (s *system) waitSiloReady(ctx context.Context, sl *silo) error {
	line := make(chan string, 1)
	go func() {
		defer sl.ready.Close()
		l, _ := bufio.NewReader(io.LimitReader(sl.ready, 4096)).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	var got string
	select {
	case got = <-line:
	case <-ctx.Done():
		return hresult.Errorf(computecore.E_CANCELLED, "start of compute system %q: %v", s.id, ctx.Err())
	case <-time.After(time.Minute):
		got = "no answer within a minute"
	}
	if got != "ready" {
		return hresult.Errorf(computecore.HCS_E_TERMINATED_DURING_START, "start of compute system %q: its silo init failed: %s", s.id, got)
	}
	var err error
	if sl.pid, err = os.Open(fmt.Sprintf("/proc/%d/ns/pid", sl.init.Pid)); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of compute system %q: open its PID namespace: %v", s.id, err)
	}
	log.G(ctx).WithFields(log.Fields{"system": s.id, "init": sl.init.Pid}).Debug("hcsemu: silo init ready")
	return nil
}

// watchSilo reaps a silo init. Its death kills every process of the container; if it dies
// while the container runs, the container has crashed.
func (s *system) watchSilo(sl *silo) {
	st, err := sl.init.Wait()
	sl.code = -1
	if err == nil {
		sl.code = st.ExitCode()
	}
	close(sl.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silo == sl && (s.state == schema2.StateRunning || s.state == schema2.StatePaused) {
		log.L.WithField("system", s.id).Warn("hcsemu: the silo init died: the container crashed")
		s.stopLocked(context.Background(), schema2.NotificationUnexpectedExit)
	}
}

// close asks the init to clean up and end, which kills every process left in the namespace,
// and waits for it (killing it if it does not end within a generous deadline). The request is
// repeated: the kernel drops a signal to a PID namespace's init from outside it until the init
// has a handler for it (pid_namespaces(7)), and a stop can come before the init installed one.
// Whatever the init left mounted is then unmounted here.
func (sl *silo) close(ctx context.Context, id string) {
	if sl.pid != nil {
		sl.pid.Close()
	}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	_ = sl.init.Signal(syscall.SIGTERM)
wait:
	for {
		select {
		case <-sl.done:
			break wait
		case <-tick.C:
			_ = sl.init.Signal(syscall.SIGTERM)
		case <-deadline:
			sl.init.Kill()
			<-sl.done
			break wait
		}
	}
	if sl.code != 0 {
		log.G(ctx).WithFields(log.Fields{"system": id, "exitCode": sl.code}).Warn("hcsemu: the silo init did not end cleanly")
	}
	if err := sl.unmountProc(); err != nil {
		log.G(ctx).WithError(err).WithField("system", id).Warn("hcsemu: C:\\proc left mounted")
	}
}

// unmountProc unmounts the procfs the init mounted on C:\proc, if it is still there (the init
// was killed, or died, before it cleaned up), and removes the folder if hcsemu made it.
func (sl *silo) unmountProc() error {
	if sl.root == nil {
		return nil
	}
	f, err := sl.root.Open(siloProcDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err == nil && st.Type == unix.PROC_SUPER_MAGIC {
		// The descriptor names the mount: the path inside the volume is never followed again.
		err = unix.Unmount("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.MNT_DETACH)
		f.Close()
		if err != nil {
			return fmt.Errorf("unmount C:\\%s: %w", siloProcDir, err)
		}
	} else {
		f.Close()
	}
	if sl.made {
		if err := sl.root.Remove(siloProcDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// stopSiloLocked ends a stopping container's silo: its init, with every process left in the
// namespace, its procfs, and C:\proc when hcsemu made it.
func (s *system) stopSiloLocked(ctx context.Context) {
	if sl := s.silo; sl != nil {
		s.silo = nil
		sl.close(ctx, s.id)
	}
}
