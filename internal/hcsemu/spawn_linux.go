package hcsemu

import (
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
	close(ready)
	for req := range s.reqs {
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

// spawn runs start on the spawner thread, inside cg's groups when cg is not nil.
func (s *spawner) spawn(cg *cgroup, start func() (*os.Process, error)) (*os.Process, error) {
	done := make(chan spawnResult, 1)
	s.reqs <- spawnRequest{cg: cg, start: start, done: done}
	r := <-done
	return r.p, r.err
}
