package compute

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// The cgroup v1 controllers each compute system gets a group in (package layout says which and
// why; the test harness's leak checks look there too).
var cgroupControllers = layout.CgroupControllers()

// cfsPeriodUs is the CFS period the processor limits are expressed against (the kernel's default).
const cfsPeriodUs = 100000

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
func readProcCgroups(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, sc.Err()
}

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

func (g *cgroup) dir(controller string) string {
	return filepath.Join(g.m.mountRoot, controller, g.m.base, g.name)
}

func (g *cgroup) write(controller, file, value string) error {
	p := filepath.Join(g.dir(controller), file)
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, err)
	}
	return nil
}

func (g *cgroup) read(controller, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(g.dir(controller), file))
	return strings.TrimSpace(string(b)), err
}

func (g *cgroup) readUint(controller, file string) uint64 {
	s, err := g.read(controller, file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
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
	for _, c := range controllers {
		if err := g.write(c, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// setProcessor applies Processor limits. The mapping, since cgroups and job objects differ:
//   - Count n limits the group to n CPUs' worth of time: cfs_quota = n × period.
//   - Maximum m is a share of the whole host in hundredths of a percent (1–10000), so
//     cfs_quota = m × hostCPUs × period / 10000.
//   - When both are set, the smaller quota wins (HCS applies both job-object limits).
//   - Weight w (1–10000) is relative, as cpu.shares is; it is passed through as the share
//     count (at least 2, the kernel's minimum). 0 leaves the kernel's default (1024).
func (g *cgroup) setProcessor(count uint32, maximum, weight uint64, hostCPUs int) error {
	quota := int64(-1)
	if count > 0 {
		quota = int64(count) * cfsPeriodUs
	}
	if maximum > 0 {
		q := int64(maximum) * int64(hostCPUs) * cfsPeriodUs / 10000
		if q < 1000 {
			q = 1000 // the kernel's minimum quota is 1ms
		}
		if quota < 0 || q < quota {
			quota = q
		}
	}
	if err := g.write("cpu", "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUs)); err != nil {
		return err
	}
	if err := g.write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
		return err
	}
	shares := uint64(1024)
	if weight > 0 {
		shares = max(weight, 2)
	}
	return g.write("cpu", "cpu.shares", strconv.FormatUint(shares, 10))
}

// setMemory applies Memory.SizeInMB as memory.limit_in_bytes (0: no limit), and as
// memory.memsw.limit_in_bytes where swap is accounted, since a job object's commit limit
// counts what is paged out too: without it a process could swap past its limit.
func (g *cgroup) setMemory(sizeInMB uint64) error {
	v := "-1"
	if sizeInMB > 0 {
		v = strconv.FormatUint(sizeInMB<<20, 10)
	}
	if _, err := os.Stat(filepath.Join(g.dir("memory"), "memory.memsw.limit_in_bytes")); err != nil {
		return g.write("memory", "memory.limit_in_bytes", v)
	}
	// The kernel keeps memsw ≥ limit: lowering goes limit first, raising memsw first.
	if err := g.write("memory", "memory.limit_in_bytes", v); err == nil {
		return g.write("memory", "memory.memsw.limit_in_bytes", v)
	}
	if err := g.write("memory", "memory.memsw.limit_in_bytes", v); err != nil {
		return err
	}
	return g.write("memory", "memory.limit_in_bytes", v)
}

// freeze stops every process of the group and waits until the kernel reports it FROZEN.
func (g *cgroup) freeze(ctx context.Context) error {
	return g.setFreezer(ctx, "FROZEN")
}

func (g *cgroup) thaw(ctx context.Context) error {
	return g.setFreezer(ctx, "THAWED")
}

func (g *cgroup) setFreezer(ctx context.Context, state string) error {
	for {
		if err := g.write("freezer", "freezer.state", state); err != nil {
			return err
		}
		s, err := g.read("freezer", "freezer.state")
		if err != nil {
			return err
		}
		if s == state {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("freezer of %s is %s, not %s: %w", g.name, s, state, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// pids lists the processes in the group.
func (g *cgroup) pids() []int {
	s, err := g.read("pids", "cgroup.procs")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(s) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// kill ends every process in the group: frozen first, so nothing forks while it is being
// killed, then SIGKILL to each, then thawed so the kills take effect.
func (g *cgroup) kill(ctx context.Context) {
	if _, err := os.Stat(g.dir("freezer")); err != nil {
		return // gone already (a VM's group removes its containers' groups)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.freeze(ctx); err != nil {
		log.G(ctx).WithError(err).WithField("system", g.name).Debug("hcsemu: freeze before kill")
	}
	for _, pid := range g.pids() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := g.thaw(ctx); err != nil {
		log.G(ctx).WithError(err).WithField("system", g.name).Warn("hcsemu: thaw after kill")
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

func (g *cgroup) remove() error {
	var errs []error
	for _, c := range cgroupControllers {
		if err := os.Remove(g.dir(c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cgroupStats is what the groups account, in the units Statistics wants.
type cgroupStats struct {
	total100ns, user100ns, kernel100ns  uint64
	memUsage, memPeak, memPrivate       uint64
	readOps, readBytes, writeOps, wrote uint64
}

// userHZ is USER_HZ, the unit of cpuacct.stat; it is 100 on every Linux architecture Go runs on.
const userHZ = 100

func (g *cgroup) stats() cgroupStats {
	var s cgroupStats
	s.total100ns = g.readUint("cpuacct", "cpuacct.usage") / 100
	if st, err := g.read("cpuacct", "cpuacct.stat"); err == nil {
		for _, line := range strings.Split(st, "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "user":
				s.user100ns = n * (10_000_000 / userHZ)
			case "system":
				s.kernel100ns = n * (10_000_000 / userHZ)
			}
		}
	}
	s.memUsage = g.readUint("memory", "memory.usage_in_bytes")
	s.memPeak = g.readUint("memory", "memory.max_usage_in_bytes")
	if st, err := g.read("memory", "memory.stat"); err == nil {
		for _, line := range strings.Split(st, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "total_rss" {
				s.memPrivate, _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	// blkio accounts I/O to block devices only (an overlay on tmpfs shows none); its absence
	// leaves zeros, as the brief of Statistics.Storage allows.
	s.readOps, s.writeOps = blkioTotals(g, "blkio.throttle.io_serviced")
	s.readBytes, s.wrote = blkioTotals(g, "blkio.throttle.io_service_bytes")
	return s
}

// blkioTotals sums the Read and Write lines of a blkio.throttle file ("MAJ:MIN Read N").
func blkioTotals(g *cgroup, file string) (read, write uint64) {
	st, err := g.read("blkio", file)
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(st, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n, _ := strconv.ParseUint(f[2], 10, 64)
		switch f[1] {
		case "Read":
			read += n
		case "Write":
			write += n
		}
	}
	return read, write
}
