package compute

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"
)

// spawner starts every container process from one OS thread that it locks and never releases.
// Two things depend on that thread:
//   - Pdeathsig: the kernel sends it to a child when the *thread* that forked it exits, not the
//     process; a Go thread can go away under a goroutine that is not locked to it, which would
//     kill a container process for no reason. A thread that lives as long as the daemon makes
//     Pdeathsig mean "the daemon died".
//   - cgroups: the thread moves into the system's cgroups before forking, so the child starts
//     inside them (cgroup v1 has no CLONE_INTO_CGROUP) and cannot fork out of reach of limits
//     or of the kill that ends the system (the freezer); then it moves back. The memory group
//     cannot be joined that way (see threadControllers), so a process of a system with groups
//     starts traced (PTRACE_TRACEME) and stops at its exec, before its first instruction; the
//     spawner moves it into the memory group and only then lets it run (resume). Windows does
//     the same with a job object: HCS creates the process suspended, assigns it and resumes it.
//     Without this, on a loaded machine the process allocated outside its memory limit and its
//     statistics until the move (measured: 29 MiB of a 64 MiB allocation missing).
//   - ptrace: the tracer of a process started traced is the thread that forked it, so only this
//     thread can release it.
type spawner struct {
	reqs chan spawnRequest
}

type spawnRequest struct {
	cg    *cgroup
	netns *os.File      // the network namespace to start in; nil: the daemon's
	vm    *vmNamespaces // a utility VM's namespaces to start in (vminit_linux.go); nil: none
	// hostname: start in a UTS namespace of its own with this host name (a container's
	// GuestOs.HostName; with vm, one inside the VM's); "": the daemon's (or the VM's).
	hostname string
	// pidns: start in this PID namespace (a process-isolated container's silo, silo_linux.go);
	// nil: the daemon's. Not with vm.
	pidns *os.File
	name  string
	argv  []string
	attr  *os.ProcAttr
	done  chan spawnResult
}

type spawnResult struct {
	p   *os.Process
	err error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	ready := make(chan struct{})
	go s.loop(ready)
	<-ready
	return s
}

func (s *spawner) loop(ready chan<- struct{}) {
	// Never unlocked: the goroutine runs for the life of the daemon, and so does its thread.
	runtime.LockOSThread()
	tid := unix.Gettid()
	// The daemon's own network namespace, which the thread returns to for processes of
	// systems without one. Every spawn sets the thread's namespace explicitly, so a failed
	// return never leaks a namespace into the next spawn.
	own, ownErr := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
	// Entering a VM's mount namespace needs a thread that shares no file system state
	// (setns(2): CLONE_NEWNS); the thread is never released to other goroutines.
	home, homeErr := openHomeNamespaces(tid)
	close(ready)
	for req := range s.reqs {
		target := own
		if req.netns != nil {
			target = req.netns
		}
		if ownErr != nil || target == nil {
			req.done <- spawnResult{err: fmt.Errorf("the spawner cannot open its network namespace: %v", ownErr)}
			continue
		}
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			req.done <- spawnResult{err: fmt.Errorf("enter the network namespace %s: %w", target.Name(), err)}
			continue
		}
		if req.vm != nil {
			p, err := s.spawnInVM(req, home, homeErr, tid)
			req.done <- spawnResult{p: p, err: err}
			continue
		}
		p, err := startInSilo(req, tid, home, homeErr)
		req.done <- spawnResult{p: p, err: err}
	}
}

// startInSilo starts req in its PID namespace when it names one (the thread's children are
// born there; the thread itself stays where it is), then returns the thread's children to the
// daemon's namespace. Like startWithHostname, a thread that cannot return stops the daemon.
func startInSilo(req spawnRequest, tid int, home *homeNamespaces, homeErr error) (*os.Process, error) {
	if req.pidns != nil {
		if homeErr != nil {
			return nil, fmt.Errorf("the spawner cannot return to its PID namespace: %v", homeErr)
		}
		if err := unix.Setns(int(req.pidns.Fd()), unix.CLONE_NEWPID); err != nil {
			return nil, fmt.Errorf("enter the container's PID namespace: %w", err)
		}
		defer func() {
			if err := unix.Setns(int(home.pid.Fd()), unix.CLONE_NEWPID); err != nil {
				log.L.WithError(err).Error("hcsemu: the spawner thread cannot return to its PID namespace")
				panic(fmt.Sprintf("hcsemu: spawner thread stuck in a container's PID namespace: %v", err))
			}
		}()
	}
	if req.hostname != "" {
		return startWithHostname(req, tid, home, homeErr)
	}
	return startInGroups(req, tid)
}

// startWithHostname is startInGroups in a new UTS namespace named req.hostname: a Windows
// container is a computer of its own, whose name (what hostname.exe and the
// COMPUTERNAME-based APIs answer) is the HostName its document gives (hcsshim sets it from the
// OCI spec's hostname, which containerd's CRI sets to the pod's). The spawner thread makes the
// namespace, forks the child into it and returns to the daemon's; each process of the
// container gets a namespace of its own with the same name, which no process can tell from
// one shared namespace, as none may change the name (Windows needs an administrator and a
// restart for that). A thread that cannot return to the daemon's namespace (it holds it open,
// so this does not happen) stops the daemon rather than start later processes under a wrong
// name.
func startWithHostname(req spawnRequest, tid int, home *homeNamespaces, homeErr error) (*os.Process, error) {
	if homeErr != nil {
		return nil, fmt.Errorf("the spawner cannot return to its UTS namespace: %v", homeErr)
	}
	defer func() {
		if err := unix.Setns(int(home.uts.Fd()), unix.CLONE_NEWUTS); err != nil {
			// Not recoverable on this thread; the daemon cannot go on starting processes.
			log.L.WithError(err).Error("hcsemu: the spawner thread cannot return to its UTS namespace")
			panic(fmt.Sprintf("hcsemu: spawner thread stuck in a container's UTS namespace: %v", err))
		}
	}()
	return startNamed(req, tid)
}

// startNamed moves the spawner thread into a new UTS namespace named req.hostname and starts
// req there. The caller returns the thread to its own UTS namespace afterwards.
func startNamed(req spawnRequest, tid int) (*os.Process, error) {
	name := req.hostname
	if len(name) > 64 { // the kernel's limit (HOST_NAME_MAX); Kubernetes' host names fit in 63
		name = name[:64]
	}
	if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
		return nil, fmt.Errorf("make a UTS namespace for host name %q: %w", req.hostname, err)
	}
	if err := unix.Sethostname([]byte(name)); err != nil {
		return nil, fmt.Errorf("set host name %q: %w", req.hostname, err)
	}
	return startInGroups(req, tid)
}

// startInGroups starts req on the spawner thread (tid) inside req.cg's groups: the thread enters
// them and forks; the child stops at its exec until it has joined its memory group too.
func startInGroups(req spawnRequest, tid int) (*os.Process, error) {
	entered := false
	if req.cg != nil {
		if err := req.cg.enterThread(tid); err != nil {
			log.L.WithError(err).Warn("hcsemu: cannot start the process inside its cgroups; moving it after start")
		} else {
			entered = true
		}
	}
	attr := req.attr
	if req.cg != nil {
		copied := *attr
		sys := syscall.SysProcAttr{}
		if attr.Sys != nil {
			sys = *attr.Sys
		}
		sys.Ptrace = true
		copied.Sys = &sys
		attr = &copied
	}
	p, err := os.StartProcess(req.name, req.argv, attr)
	if entered {
		req.cg.leaveThread(tid)
	}
	if err == nil && req.cg != nil {
		controllers := []string{"memory"}
		if !entered {
			controllers = cgroupControllers
		}
		err = joinAndResume(p, req.cg, controllers)
	}
	return p, err
}

// joinAndResume moves p, stopped at its exec, into the groups of controllers and lets it run.
// It must run on the thread that started p. If p cannot join its groups it is killed: a
// process outside its limits is not what the caller asked for.
func joinAndResume(p *os.Process, cg *cgroup, controllers []string) error {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(p.Pid, &ws, unix.WALL, nil); err != nil {
		p.Kill()
		return fmt.Errorf("wait for process %d to stop at its start: %w", p.Pid, err)
	}
	if !ws.Stopped() {
		// Killed before it ran (the wait has reaped it); nothing is left to clean up.
		return fmt.Errorf("process %d ended before it started: %v", p.Pid, describeWait(ws))
	}
	if err := cg.addProcess(p.Pid, controllers...); err != nil {
		p.Kill()
		unix.PtraceDetach(p.Pid)
		return fmt.Errorf("move process %d into its cgroups: %w", p.Pid, err)
	}
	// Detaching with no signal resumes it and discards the SIGTRAP of its exec.
	if err := unix.PtraceDetach(p.Pid); err != nil {
		p.Kill()
		return fmt.Errorf("resume process %d: %w", p.Pid, err)
	}
	return nil
}

func describeWait(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit code %d", ws.ExitStatus())
}

// spawn starts name (os.StartProcess) on the spawner thread, inside cg's groups when cg is not
// nil and in the network namespace netns when it is not nil: the child is forked from that
// thread and so starts in both, and runs its first instruction only once it is in every group.
func (s *spawner) spawn(cg *cgroup, netns *os.File, name string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	return s.spawnIn(cg, netns, nil, name, argv, attr)
}

// spawnIn is spawn inside a utility VM's namespaces too, when vm is not nil.
func (s *spawner) spawnIn(cg *cgroup, netns *os.File, vm *vmNamespaces, name string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	return s.spawnAs(cg, netns, vm, nil, "", name, argv, attr)
}

// spawnAs is spawnIn in a UTS namespace named hostname when it is not "" and in the PID
// namespace pidns when it is not nil (both only when vm is nil).
func (s *spawner) spawnAs(cg *cgroup, netns *os.File, vm *vmNamespaces, pidns *os.File, hostname, name string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	done := make(chan spawnResult, 1)
	s.reqs <- spawnRequest{cg: cg, netns: netns, vm: vm, pidns: pidns, hostname: hostname, name: name, argv: argv, attr: attr, done: done}
	r := <-done
	return r.p, r.err
}
