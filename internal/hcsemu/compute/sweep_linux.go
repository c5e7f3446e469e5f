package compute

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// The cgroups of dead daemons. A daemon removes its folders /sys/fs/cgroup/<controller>/
// hcsemu/<instance> when it stops, and a daemon starting on the root of a dead one ends what
// that one left (newCgroupManager); but a daemon killed outright whose root is never used again
// (a test's temporary root) leaves its folders, with the groups of its systems and perhaps
// their processes, until the machine reboots. So a starting daemon also sweeps the folders of
// every other instance no live daemon owns.
//
// Ownership: a live daemon holds its root's hcsemu.lock open (NewEngine), and its instance
// is the hash of that root (layout.Instance). The sweep lists the instance folders first and only
// then the lock files held open on the machine: a daemon that starts in between takes its lock
// before it makes its folder, so its folder is either not in the list or its lock is seen. A
// daemon restarted on a dead instance's root while the sweep ends that instance is seen by
// the checks made again before each instance and before its folders are removed; what is left
// is the moment between the last check and the removal (assumption: a daemon starting on that
// root in exactly that moment is rare enough; it would fail to make its systems' groups).

// lockFileName is the file in a daemon's root it holds locked while it runs.
const lockFileName = "hcsemu.lock"

// liveInstances are the instances of the daemons running on the machine: the folders of the
// hcsemu.lock files some process holds open, hashed. procRoot is /proc.
func liveInstances(procRoot string) map[string]bool {
	live := map[string]bool{}
	procs, _ := os.ReadDir(procRoot)
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		fdDir := filepath.Join(procRoot, p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or a kernel thread
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || filepath.Base(target) != lockFileName {
				continue
			}
			live[layout.Instance(filepath.Dir(strings.TrimSuffix(target, " (deleted)")))] = true
		}
	}
	return live
}

// sweepDeadInstances ends the systems and removes the folders of every instance under
// <cgroupRoot>/<controller>/hcsemu other than own that no live daemon owns. Failures are
// logged: they cost nothing but the leftovers they leave.
func sweepDeadInstances(ctx context.Context, cgroupRoot, procRoot, own string) {
	dead := map[string]bool{}
	for _, c := range cgroupControllers {
		entries, _ := os.ReadDir(filepath.Join(cgroupRoot, c, layout.CgroupFolder))
		for _, e := range entries {
			if e.IsDir() && e.Name() != own {
				dead[e.Name()] = true
			}
		}
	}
	if len(dead) == 0 {
		return
	}
	for inst := range liveInstances(procRoot) {
		delete(dead, inst)
	}
	for inst := range dead {
		// Asked again right before acting: ending one instance can take seconds (processes
		// to wait for), and a daemon of a later one's root may have started meanwhile.
		if liveInstances(procRoot)[inst] {
			continue
		}
		m := &cgroupManager{mountRoot: cgroupRoot, base: layout.CgroupBase(inst)}
		systems := map[string]bool{}
		for _, c := range cgroupControllers {
			entries, _ := os.ReadDir(filepath.Join(cgroupRoot, c, m.base))
			for _, e := range entries {
				if e.IsDir() {
					systems[e.Name()] = true
				}
			}
		}
		for name := range systems {
			log.G(ctx).WithFields(log.Fields{"instance": inst, "system": name}).Warn("hcsemu: removing a compute system group left by a dead daemon of another root")
			(&cgroup{m: m, name: name}).destroy(ctx)
		}
		if liveInstances(procRoot)[inst] {
			continue // it has a daemon again, which keeps its folders
		}
		if err := m.removeBase(); err != nil {
			log.G(ctx).WithError(err).WithField("instance", inst).Warn("hcsemu: cannot remove the cgroups of a dead daemon")
		} else {
			log.G(ctx).WithField("instance", inst).Info("hcsemu: removed the cgroups of a dead daemon")
		}
	}
}
