package compute

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/cgroup1"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// The cgroup v1 controllers each compute system gets a group in (package layout says which and
// why; the test harness's leak checks look there too).
var cgroupControllers = layout.CgroupControllers()

// cfsPeriodUs is the CFS period the processor limits are expressed against (the kernel's default).
const cfsPeriodUs = cgroup1.CFSPeriodUs

// cgroupManager owns /sys/fs/cgroup/<controller>/hcsemu/<instance>: one folder per daemon
// (instance is derived from its --root, so that daemons of different roots, as tests start
// them, never touch each other's groups), and below it one folder per compute system.
type cgroupManager struct {
	mountRoot string // /sys/fs/cgroup
	base      string // hcsemu/<instance>
	// home is the group (per controller) the daemon's threads started in, where the spawner
	// thread returns after each fork.
	home map[string]string
}

func newCgroupManager(ctx context.Context, mountRoot, instance string) (*cgroupManager, error) {
	m := &cgroupManager{mountRoot: mountRoot, base: layout.CgroupBase(instance), home: map[string]string{}}
	self, err := readProcCgroups("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, c := range cgroupControllers {
		if _, err := os.Stat(filepath.Join(mountRoot, c)); err != nil {
			return nil, fmt.Errorf("cgroup v1 controller %q is not mounted at %s: %w", c, filepath.Join(mountRoot, c), err)
		}
		m.home[c] = self[c]
		dir := filepath.Join(mountRoot, c, m.base)
		// A previous daemon of the same root that died left its systems behind: end them.
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				g := &cgroup{m: m, name: e.Name()}
				log.G(ctx).WithField("system", e.Name()).Warn("hcsemu: removing a compute system group left by an earlier daemon")
				g.destroy(ctx)
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	return m, nil
}

// readProcCgroups parses /proc/<pid>/cgroup into controller → path.
func readProcCgroups(path string) (map[string]string, error) { return cgroup1.ProcCgroups(path) }

// groupName turns a system id into a folder name: ids are usually GUIDs or containerd ids, but
// anything outside [A-Za-z0-9._-] is hex-escaped so no id can name another folder.
func groupName(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	return b.String()
}

// cgroup is one compute system's groups.
type cgroup struct {
	m    *cgroupManager
	name string
}

func (m *cgroupManager) create(id string) (*cgroup, error) {
	g := &cgroup{m: m, name: groupName(id)}
	for _, c := range cgroupControllers {
		if err := os.Mkdir(g.dir(c), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			g.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", g.dir(c), err)
		}
	}
	return g, nil
}

// groupFor names the group a system with this id has (or would have).
// removeBase removes the daemon's own group folders (empty once its systems are gone).
func (m *cgroupManager) removeBase() error {
	var errs []error
	for _, c := range cgroupControllers {
		if err := os.Remove(filepath.Join(m.mountRoot, c, m.base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *cgroupManager) groupFor(id string) *cgroup { return &cgroup{m: m, name: groupName(id)} }

// group is the cgroup1 group of the system: the mechanism, shared with internal/hostprocess.
func (g *cgroup) group() cgroup1.Group {
	return cgroup1.Group{Root: g.m.mountRoot, Path: filepath.Join(g.m.base, g.name)}
}

func (g *cgroup) dir(controller string) string { return g.group().Dir(controller) }

func (g *cgroup) write(controller, file, value string) error {
	return g.group().Write(controller, file, value)
}

func (g *cgroup) read(controller, file string) (string, error) {
	return g.group().Read(controller, file)
}

func (g *cgroup) readUint(controller, file string) uint64 {
	return g.group().ReadUint(controller, file)
}

// threadControllers are the controllers the spawner thread enters before it forks. memory is
// not one of them: a memory cgroup's OOM killer picks among the tasks in it, and the daemon must
// never be its victim; a process joins its memory group right after it starts instead.
var threadControllers = []string{"cpu", "cpuacct", "freezer", "pids", "blkio"}

// enterThread moves the calling OS thread (tid) into the groups of threadControllers, so that
// what it forks starts inside them; leaveThread moves it back home. cgroup v1 places threads
// individually ("tasks").
func (g *cgroup) enterThread(tid int) error {
	for _, c := range threadControllers {
		if err := g.write(c, "tasks", strconv.Itoa(tid)); err != nil {
			g.leaveThread(tid)
			return err
		}
	}
	return nil
}

func (g *cgroup) leaveThread(tid int) {
	for _, c := range threadControllers {
		p := filepath.Join(g.m.mountRoot, c, g.m.home[c], "tasks")
		if err := os.WriteFile(p, []byte(strconv.Itoa(tid)), 0); err != nil {
			log.L.WithError(err).WithField("path", p).Warn("hcsemu: cannot move the spawner thread back")
		}
	}
}

// addProcess moves a process (all its threads) into the groups of the given controllers.
func (g *cgroup) addProcess(pid int, controllers ...string) error {
	return g.group().AddProcess(pid, controllers...)
}

// setProcessor applies Processor limits (cgroup1.Group.SetProcessor has the mapping).
func (g *cgroup) setProcessor(count uint32, maximum, weight uint64, hostCPUs int) error {
	return g.group().SetProcessor(count, maximum, weight, hostCPUs)
}

// setMemory applies Memory.SizeInMB (0: no limit; cgroup1.Group.SetMemory).
func (g *cgroup) setMemory(sizeInMB uint64) error { return g.group().SetMemory(sizeInMB << 20) }

// freeze stops every process of the group and waits until the kernel reports it FROZEN.
func (g *cgroup) freeze(ctx context.Context) error { return g.group().Freeze(ctx) }

func (g *cgroup) thaw(ctx context.Context) error { return g.group().Thaw(ctx) }

// pids lists the processes in the group.
func (g *cgroup) pids() []int { return g.group().Pids() }

// kill ends every process in the group (cgroup1.Group.Kill: frozen, killed, thawed).
func (g *cgroup) kill(ctx context.Context) {
	if err := g.group().Kill(ctx); err != nil {
		log.G(ctx).WithError(err).WithField("system", g.name).Warn("hcsemu: freeze or thaw around kill")
	}
}

// destroy kills what is left in the group and removes it, waiting (bounded) for the processes
// to go away, since a group with members cannot be removed.
func (g *cgroup) destroy(ctx context.Context) {
	g.destroyChildren(ctx)
	g.kill(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for len(g.pids()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.remove(); err != nil {
		log.G(ctx).WithError(err).WithField("system", g.name).Warn("hcsemu: cannot remove the cgroup of a compute system")
	}
}

func (g *cgroup) remove() error { return g.group().Remove(cgroupControllers) }

// cgroupStats is what the groups account, in the units Statistics wants.
type cgroupStats = cgroup1.Stats

// userHZ is USER_HZ, the unit of cpuacct.stat and /proc/stat; it is 100 on every Linux
// architecture Go runs on.
const userHZ = 100

func (g *cgroup) stats() cgroupStats { return g.group().Stats() }
