package cgroup1

import (
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
)

// MountRoot is where the cgroup v1 controllers are mounted, each in a folder of its name.
const MountRoot = "/sys/fs/cgroup"

// CFSPeriodUs is the CFS period the processor limits are expressed against (the kernel's
// default).
const CFSPeriodUs = 100000

// Group is the folder Path (relative to each controller's mount) under Root (MountRoot when
// empty), in each controller that has one.
type Group struct {
	Root, Path string
}

// Dir is the group's folder in controller.
func (g Group) Dir(controller string) string {
	root := g.Root
	if root == "" {
		root = MountRoot
	}
	return filepath.Join(root, controller, g.Path)
}

// Create makes the group's folder in each controller (present already: fine); on failure it
// removes what it made.
func (g Group) Create(controllers []string) error {
	for _, c := range controllers {
		if err := os.Mkdir(g.Dir(c), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			_ = g.Remove(controllers)
			return fmt.Errorf("create cgroup %s: %w", g.Dir(c), err)
		}
	}
	return nil
}

// Exists reports whether the group has its folder in controller.
func (g Group) Exists(controller string) bool {
	_, err := os.Stat(g.Dir(controller))
	return err == nil
}

// Remove removes the group's folders (absent: done); a group with members cannot be removed.
func (g Group) Remove(controllers []string) error {
	var errs []error
	for _, c := range controllers {
		if err := os.Remove(g.Dir(c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Write writes value to one of the group's files.
func (g Group) Write(controller, file, value string) error {
	p := filepath.Join(g.Dir(controller), file)
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, err)
	}
	return nil
}

// Read reads one of the group's files, without surrounding space.
func (g Group) Read(controller, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(g.Dir(controller), file))
	return strings.TrimSpace(string(b)), err
}

// ReadUint reads a file holding one number; unreadable is 0.
func (g Group) ReadUint(controller, file string) uint64 {
	s, err := g.Read(controller, file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// AddProcess moves a process (all its threads) into the group of each controller.
func (g Group) AddProcess(pid int, controllers ...string) error {
	for _, c := range controllers {
		if err := g.Write(c, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// SetProcessor applies HCS's Processor limits (a job object's CPU rate control). The mapping,
// since cgroups and job objects differ:
//   - Count n limits the group to n CPUs' worth of time: cfs_quota = n × period.
//   - Maximum m is a share of the whole host in hundredths of a percent (1–10000), so
//     cfs_quota = m × hostCPUs × period / 10000.
//   - When both are set, the smaller quota wins (HCS applies both job-object limits).
//   - Weight w (1–10000) is relative, as cpu.shares is; it is passed through as the share
//     count (at least 2, the kernel's minimum). 0 leaves the kernel's default (1024).
//
// All zero removes the limits.
func (g Group) SetProcessor(count uint32, maximum, weight uint64, hostCPUs int) error {
	quota := int64(-1)
	if count > 0 {
		quota = int64(count) * CFSPeriodUs
	}
	if maximum > 0 {
		q := int64(maximum) * int64(hostCPUs) * CFSPeriodUs / 10000
		if q < 1000 {
			q = 1000 // the kernel's minimum quota is 1ms
		}
		if quota < 0 || q < quota {
			quota = q
		}
	}
	if err := g.Write("cpu", "cpu.cfs_period_us", strconv.Itoa(CFSPeriodUs)); err != nil {
		return err
	}
	if err := g.Write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
		return err
	}
	shares := uint64(1024)
	if weight > 0 {
		shares = max(weight, 2)
	}
	return g.Write("cpu", "cpu.shares", strconv.FormatUint(shares, 10))
}

// SetMemory applies a memory limit of bytes as memory.limit_in_bytes (0: no limit), and as
// memory.memsw.limit_in_bytes where swap is accounted, since a job object's commit limit
// counts what is paged out too: without it a process could swap past its limit.
func (g Group) SetMemory(bytes uint64) error {
	v := "-1"
	if bytes > 0 {
		v = strconv.FormatUint(bytes, 10)
	}
	if _, err := os.Stat(filepath.Join(g.Dir("memory"), "memory.memsw.limit_in_bytes")); err != nil {
		return g.Write("memory", "memory.limit_in_bytes", v)
	}
	// The kernel keeps memsw ≥ limit: lowering goes limit first, raising memsw first.
	if err := g.Write("memory", "memory.limit_in_bytes", v); err == nil {
		return g.Write("memory", "memory.memsw.limit_in_bytes", v)
	}
	if err := g.Write("memory", "memory.memsw.limit_in_bytes", v); err != nil {
		return err
	}
	return g.Write("memory", "memory.limit_in_bytes", v)
}

// Freeze stops every process of the group and waits until the kernel reports it FROZEN.
func (g Group) Freeze(ctx context.Context) error { return g.setFreezer(ctx, "FROZEN") }

// Thaw lets the group's processes run again.
func (g Group) Thaw(ctx context.Context) error { return g.setFreezer(ctx, "THAWED") }

func (g Group) setFreezer(ctx context.Context, state string) error {
	for {
		if err := g.Write("freezer", "freezer.state", state); err != nil {
			return err
		}
		s, err := g.Read("freezer", "freezer.state")
		if err != nil {
			return err
		}
		if s == state {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("freezer of %s is %s, not %s: %w", g.Path, s, state, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Pids lists the processes in the group (from the pids controller).
func (g Group) Pids() []int {
	s, err := g.Read("pids", "cgroup.procs")
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

// Kill ends every process in the group: frozen first, so nothing forks while it is being
// killed, then SIGKILL to each, then thawed so the kills take effect. A group without a
// freezer folder is gone already: done. The error is the freezer's; the kills happen anyway.
// The calling process is never killed: a thread of it may be in the group for a moment, to
// fork a process into it, and cgroup.procs then names it.
func (g Group) Kill(ctx context.Context) error {
	if !g.Exists("freezer") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ferr := g.Freeze(ctx)
	self := os.Getpid()
	for _, pid := range g.Pids() {
		if pid != self {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := g.Thaw(ctx); err != nil {
		return errors.Join(ferr, err)
	}
	return nil
}

// WaitEmpty waits, up to timeout, until the group has no process left; it reports whether it
// is empty.
func (g Group) WaitEmpty(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for len(g.Pids()) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Stats is what the group accounts, in the units HCS's Statistics uses.
type Stats struct {
	Total100ns, User100ns, Kernel100ns  uint64
	MemUsage, MemPeak, MemPrivate       uint64
	ReadOps, ReadBytes, WriteOps, Wrote uint64
}

// userHZ is USER_HZ, the unit of cpuacct.stat; it is 100 on every Linux architecture Go runs on.
const userHZ = 100

// Stats reads the group's accounting: cpuacct's times (100ns units), memory's usage, peak and
// resident set, blkio's operations and bytes; what cannot be read is 0.
func (g Group) Stats() Stats {
	var s Stats
	s.Total100ns = g.ReadUint("cpuacct", "cpuacct.usage") / 100
	if st, err := g.Read("cpuacct", "cpuacct.stat"); err == nil {
		for _, line := range strings.Split(st, "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "user":
				s.User100ns = n * (10_000_000 / userHZ)
			case "system":
				s.Kernel100ns = n * (10_000_000 / userHZ)
			}
		}
	}
	s.MemUsage = g.ReadUint("memory", "memory.usage_in_bytes")
	s.MemPeak = g.ReadUint("memory", "memory.max_usage_in_bytes")
	if st, err := g.Read("memory", "memory.stat"); err == nil {
		for _, line := range strings.Split(st, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "total_rss" {
				s.MemPrivate, _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	// blkio accounts I/O to block devices only (an overlay on tmpfs shows none); its absence
	// leaves zeros, as the brief of Statistics.Storage allows.
	s.ReadOps, s.WriteOps = g.blkioTotals("blkio.throttle.io_serviced")
	s.ReadBytes, s.Wrote = g.blkioTotals("blkio.throttle.io_service_bytes")
	return s
}

// blkioTotals sums the Read and Write lines of a blkio.throttle file ("MAJ:MIN Read N").
func (g Group) blkioTotals(file string) (read, write uint64) {
	st, err := g.Read("blkio", file)
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

// ProcCgroups parses a /proc/<pid>/cgroup file into controller → group path.
func ProcCgroups(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, nil
}
