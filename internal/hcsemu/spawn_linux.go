package hcsemu

import (
	"fmt"
	"os"
	"runtime"

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
//     or of the kill that ends the system (the freezer); then it moves back. The memory group is
//     joined just after the start instead (see threadControllers).
type spawner struct {
	reqs chan spawnRequest
}

type spawnRequest struct {
	cg    *cgroup
	netns *os.File      // the network namespace to start in; nil: the daemon's
	vm    *vmNamespaces // a utility VM's namespaces to start in (vminit_linux.go); nil: none
	start func() (*os.Process, error)
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
		entered := false
		if req.cg != nil {
			if err := req.cg.enterThread(tid); err != nil {
				log.L.WithError(err).Warn("hcsemu: cannot start the process inside its cgroups; moving it after start")
			} else {
				entered = true
			}
		}
		p, err := req.start()
		if entered {
			req.cg.leaveThread(tid)
		}
		if err == nil && req.cg != nil {
			controllers := []string{"memory"}
			if !entered {
				controllers = cgroupControllers
			}
			if aerr := req.cg.addProcess(p.Pid, controllers...); aerr != nil {
				log.L.WithError(aerr).WithField("pid", p.Pid).Warn("hcsemu: cannot move the process into its cgroups")
			}
		}
		req.done <- spawnResult{p: p, err: err}
	}
}

// spawn runs start on the spawner thread, inside cg's groups when cg is not nil and in the
// network namespace netns when it is not nil: the child is forked from that thread and so
// starts in both.
func (s *spawner) spawn(cg *cgroup, netns *os.File, start func() (*os.Process, error)) (*os.Process, error) {
	return s.spawnIn(cg, netns, nil, start)
}

// spawnIn is spawn inside a utility VM's namespaces too, when vm is not nil.
func (s *spawner) spawnIn(cg *cgroup, netns *os.File, vm *vmNamespaces, start func() (*os.Process, error)) (*os.Process, error) {
	done := make(chan spawnResult, 1)
	s.reqs <- spawnRequest{cg: cg, netns: netns, vm: vm, start: start, done: done}
	r := <-done
	return r.p, r.err
}
