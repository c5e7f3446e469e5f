package compute

import (
	"fmt"
	"os"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"
)

// Starting processes inside a utility VM: the spawner thread (spawn_linux.go) enters the VM's
// IPC, UTS, PID (for its children) and mount namespaces, and its cgroups, forks, and returns to
// its own. PID namespaces apply to the children of the thread only, and the other three are the
// thread's own, so nothing else of the daemon is ever inside the VM.

// homeNamespaces are the spawner thread's own namespaces, to return to.
type homeNamespaces struct {
	pid, mnt, uts, ipc *os.File
}

func openHomeNamespaces(tid int) (*homeNamespaces, error) {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return nil, fmt.Errorf("unshare the spawner thread's file system state: %w", err)
	}
	h := &homeNamespaces{}
	for _, x := range []struct {
		name string
		f    **os.File
	}{{"pid_for_children", &h.pid}, {"mnt", &h.mnt}, {"uts", &h.uts}, {"ipc", &h.ipc}} {
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/%s", tid, x.name))
		if err != nil {
			return nil, err
		}
		*x.f = f
	}
	return h, nil
}

type nsStep struct {
	f    *os.File
	flag int
}

func setnsAll(steps []nsStep) error {
	for _, st := range steps {
		if err := unix.Setns(int(st.f.Fd()), st.flag); err != nil {
			return fmt.Errorf("setns %s: %w", st.f.Name(), err)
		}
	}
	return nil
}

// spawnInVM runs req on the spawner thread inside req.vm's namespaces and req.cg's cgroups.
func (s *spawner) spawnInVM(req spawnRequest, home *homeNamespaces, homeErr error, tid int) (*os.Process, error) {
	if homeErr != nil {
		return nil, fmt.Errorf("the spawner cannot enter a VM: %w", homeErr)
	}
	req.vm.mu.RLock()
	defer req.vm.mu.RUnlock()
	if req.vm.closed {
		return nil, fmt.Errorf("the VM has stopped")
	}
	in := []nsStep{{req.vm.ipc, unix.CLONE_NEWIPC}, {req.vm.uts, unix.CLONE_NEWUTS}, {req.vm.pid, unix.CLONE_NEWPID}, {req.vm.mnt, unix.CLONE_NEWNS}}
	out := []nsStep{{home.mnt, unix.CLONE_NEWNS}, {home.pid, unix.CLONE_NEWPID}, {home.uts, unix.CLONE_NEWUTS}, {home.ipc, unix.CLONE_NEWIPC}}
	defer func() {
		// A thread that cannot return would start the next process in the wrong place.
		if err := setnsAll(out); err != nil {
			log.L.WithError(err).Error("hcsemu: the spawner thread cannot leave a VM's namespaces")
			panic(fmt.Sprintf("hcsemu: spawner thread stuck in a VM's namespaces: %v", err))
		}
	}()
	if err := setnsAll(in); err != nil {
		return nil, fmt.Errorf("enter the VM: %w", err)
	}
	if req.hostname != "" {
		// A hosted container's process: a UTS namespace of its own inside the VM's, named
		// as its document asks (the deferred return above leaves it, as it leaves the VM's).
		return startNamed(req, tid)
	}
	return startInGroups(req, tid)
}
