package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/cgroup1"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// JobCgroupFolder is the folder under each cgroup v1 controller that holds the jobs of
// HostProcess containers in the Linux-native mode, one group per job named JobName(id)
// (escaped as jobGroupName does). Like a named job object's, the name is the machine's: a
// TerminateJob after a killed shim finds the group by it.
const JobCgroupFolder = "runhcs-hostprocess"

// jobControllers are the controllers a job has a group in: hcsemu's (the freezer stops and
// kills it as a whole, cpuacct, memory and blkio account it, cpu and memory limit it, pids
// lists it).
var jobControllers = layout.CgroupControllers()

// threadControllers are the controllers the starting thread enters before it forks, so that a
// process is born in its job; memory is not one of them (as in hcsemu's spawner: the OOM killer
// of a memory group chooses among its tasks, and the shim must never be one), a process joins
// its memory group stopped at its exec, before it runs (process_linux.go fork).
var threadControllers = []string{"cpu", "cpuacct", "freezer", "pids", "blkio"}

// JobGroup is the cgroup of container id's job.
func JobGroup(id string) cgroup1.Group {
	return cgroup1.Group{Path: filepath.Join(JobCgroupFolder, jobGroupName(JobName(id)))}
}

// jobGroupName turns a job's name into a folder name: anything outside [A-Za-z0-9._-] is
// hex-escaped (as hcsemu names its systems' groups), so no name can reach another folder.
func jobGroupName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
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

type linuxJob struct {
	id    string
	g     cgroup1.Group
	netns string
	// keeper ends the group if this process dies before Close (keeper_linux.go).
	keeper *keeper
	mu     sync.Mutex // guards closed
	// closed: Close ended the job and removed its group.
	closed bool
}

// CreateJob creates the job's cgroup (JobGroup) in every controller, starts its keeper (which
// ends the job when this process dies, as KILL_ON_JOB_CLOSE does: keeper_linux.go) and applies
// limits. A job of that name that exists already is refused, as CreateJobObjectW's
// ERROR_ALREADY_EXISTS is. A program that did not call Reexec first is refused: its keeper
// would be a second copy of the program.
func (h *linuxHost) CreateJob(ctx context.Context, id string, limits Limits) (_ Job, retErr error) {
	if !reexecCalled.Load() {
		return nil, fmt.Errorf("create job %s: this program did not call hostprocess.Reexec at its start, so the job's keeper (%s, this program re-executed) cannot run: %w", JobName(id), KeeperName, errdefs.ErrFailedPrecondition)
	}
	g := JobGroup(id)
	if g.Exists("freezer") {
		return nil, fmt.Errorf("create job %s (cgroup %s): it already exists: %w", JobName(id), g.Dir("freezer"), errdefs.ErrAlreadyExists)
	}
	for _, c := range jobControllers {
		parent := cgroup1.Group{Path: JobCgroupFolder}
		if err := parent.Create([]string{c}); err != nil {
			return nil, fmt.Errorf("create job %s: %w", JobName(id), err)
		}
	}
	if err := g.Create(jobControllers); err != nil {
		return nil, fmt.Errorf("create job %s: %w", JobName(id), err)
	}
	k, err := startKeeper(g)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create job %s: %w", JobName(id), err), endGroup(ctx, g))
	}
	j := &linuxJob{id: id, g: g, netns: h.netns, keeper: k}
	defer func() {
		if retErr != nil {
			_ = j.Close()
		}
	}()
	if err := j.SetLimits(ctx, limits); err != nil {
		return nil, err
	}
	return j, nil
}

// TerminateJob ends every process of container id's job and removes its group, as the last
// handle's close does for a job object with KILL_ON_JOB_CLOSE; no such job is done.
func (h *linuxHost) TerminateJob(ctx context.Context, id string) error {
	if err := endGroup(ctx, JobGroup(id)); err != nil {
		return fmt.Errorf("terminate job %s: %w", JobName(id), err)
	}
	return nil
}

// endGroup kills the group's processes, waits (bounded) until they are gone and removes it.
func endGroup(ctx context.Context, g cgroup1.Group) error {
	if !g.Exists("freezer") && !g.Exists("pids") {
		return g.Remove(jobControllers) // whatever controllers are left
	}
	kerr := g.Kill(ctx)
	if !g.WaitEmpty(10 * time.Second) {
		return fmt.Errorf("cgroup %s: processes %v still there after SIGKILL: %w", g.Path, g.Pids(), errdefs.ErrUnavailable)
	}
	if err := g.Remove(jobControllers); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.Path, err)
	}
	_ = kerr // the kill happened; the freezer's complaint does not matter once the group is empty
	return nil
}

func (j *linuxJob) check() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("job %s: closed: %w", JobName(j.id), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// SetLimits applies the limits as hcsemu applies a compute system's (cgroup1.Group
// SetProcessor and SetMemory): a CPU count is count CPUs' worth of cfs quota, a CPU maximum
// that share of all the host's CPUs, a weight the cpu.shares; memory is
// memory.limit_in_bytes. Zero members remove their limit.
func (j *linuxJob) SetLimits(_ context.Context, l Limits) error {
	if err := j.check(); err != nil {
		return err
	}
	if err := j.g.SetProcessor(l.CPUCount, uint64(l.CPUMaximum), uint64(l.CPUWeight), runtime.NumCPU()); err != nil {
		return fmt.Errorf("set the CPU limits of job %s to %+v: %w", JobName(j.id), l, err)
	}
	if err := j.g.SetMemory(l.MemoryBytes); err != nil {
		return fmt.Errorf("set the memory limit of job %s to %d bytes: %w", JobName(j.id), l.MemoryBytes, err)
	}
	return nil
}

// Pids lists the job's processes.
func (j *linuxJob) Pids(context.Context) ([]uint32, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	var out []uint32
	for _, p := range j.g.Pids() {
		out = append(out, uint32(p))
	}
	return out, nil
}

// Stats reads the job's accounting from its groups, in HCS's units, as hcsemu reports a
// compute system's (cgroup1.Group.Stats).
func (j *linuxJob) Stats(context.Context) (*schema2.Statistics, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	now := time.Now()
	c := j.g.Stats()
	return &schema2.Statistics{
		Timestamp: now,
		Processor: &schema2.ProcessorStats{TotalRuntime100ns: c.Total100ns, RuntimeUser100ns: c.User100ns, RuntimeKernel100ns: c.Kernel100ns},
		Memory:    &schema2.MemoryStats{MemoryUsageCommitBytes: c.MemUsage, MemoryUsageCommitPeakBytes: c.MemPeak, MemoryUsagePrivateWorkingSetBytes: c.MemPrivate},
		Storage:   &schema2.StorageStats{ReadCountNormalized: c.ReadOps, ReadSizeBytes: c.ReadBytes, WriteCountNormalized: c.WriteOps, WriteSizeBytes: c.Wrote},
	}, nil
}

// Terminate ends every process in the job (frozen, SIGKILL, thawed: exit code 1, as
// TerminateJobObject's), and waits until they are gone.
func (j *linuxJob) Terminate(ctx context.Context) error {
	if err := j.check(); err != nil {
		return err
	}
	_ = j.g.Kill(ctx)
	if !j.g.WaitEmpty(10 * time.Second) {
		return fmt.Errorf("terminate job %s: processes %v still there after SIGKILL: %w", JobName(j.id), j.g.Pids(), errdefs.ErrUnavailable)
	}
	return nil
}

// Close ends the job's processes and removes its group: this Job is the only handle, and a job
// object with KILL_ON_JOB_CLOSE ends its processes with its last handle. The group is ended
// before the keeper is released, so that a death of this process in the middle leaves the
// keeper to finish (keeper_linux.go says why the two never race).
func (j *linuxJob) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	err := endGroup(context.Background(), j.g)
	j.keeper.release()
	return err
}
