package task

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/shim/stdio"
)

// JobConfig is a HostProcess container to create, already checked by the caller.
type JobConfig struct {
	ID, Bundle string
	Chain      *layers.Chain
	Process    *specs.Process
	IO         stdio.Config
	// Mounts are the spec's mounts, bound below the container's files (hostprocess.MountPath).
	Mounts []specs.Mount
	Limits hostprocess.Limits
	// Location is where the container's files appear on the host (hostprocess.RootfsLocation).
	Location string
	// InheritUser runs the processes with the shim's own token
	// (microsoft.com/hostprocess-inherit-user).
	InheritUser bool
}

// jobRecord is what a HostProcess container leaves in its bundle state for the delete action
// (recorded before each part exists): its job, its bindings in order, and the name of the
// temporary local account a group user gets.
type jobRecord struct {
	Job      string   `json:"job"`
	Bindings []string `json:"bindings,omitempty"`
	Account  string   `json:"account,omitempty"`
}

// jobResources is a HostProcess container's part of resources: the host that made them and
// the record of what to end.
type jobResources struct {
	host hostprocess.Host
	rec  jobRecord
}

// release ends the job (a gone one is fine), removes the bindings in reverse order and deletes
// the temporary account; it is idempotent.
func (r *jobResources) release(ctx context.Context) []error {
	var errs []error
	if err := r.host.TerminateJob(ctx, r.rec.Job); err != nil {
		errs = append(errs, err)
	}
	for i := len(r.rec.Bindings) - 1; i >= 0; i-- {
		if err := r.host.Unbind(ctx, r.rec.Bindings[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if r.rec.Account != "" {
		if err := r.host.DeleteAccount(ctx, r.rec.Account); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// JobContainer is a HostProcess container (hcsshim's job container): no compute system, a job
// object on the host that holds its processes, limits and accounting, its image's files bound
// at its location on the host and its mounts below them, and its processes run as the account
// its spec names. Its init process, execs, stdio, signals and exits are a systemTask's, over
// jobSystem, which answers as a compute system would.
type JobContainer struct {
	systemTask
}

// afterInitExit ends the container with its init process, as systemTask's does, ending the
// job itself rather than asking HCS.
func (t *JobContainer) afterInitExit(ctx context.Context) {
	t.killExecs(ctx)
	tctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := t.sys.Terminate(tctx); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("terminate the job after its init process exited")
	}
}

// Start starts the init process (execID "") or an exec.
func (t *JobContainer) Start(ctx context.Context, execID string) (uint32, error) {
	return t.start(ctx, execID, t.afterInitExit)
}

// Exec adds the exec execID, created, not started; the init process must be running.
func (t *JobContainer) Exec(execID string, spec *specs.Process, io stdio.Config) error {
	return t.addExec(t, execID, spec, io)
}

// tempAccountName is the temporary local account of container id when its user is a local
// group: the id's first 20 characters, as hcsshim names it (logon.go; winapi.UserNameCharLimit).
func tempAccountName(id string) string {
	if len(id) > 20 {
		return id[:20]
	}
	return id
}

// CreateJob creates the HostProcess container c: its job, its files at c.Location and its
// mounts below, and its logon token. Each part is recorded in the bundle state before it
// exists; on failure what was acquired is released in reverse order.
func CreateJob(ctx context.Context, deps Deps, c JobConfig) (_ *JobContainer, retErr error) {
	if deps.HostProcess == nil {
		return nil, fmt.Errorf("task %s: HostProcess containers are not available in this shim: %w", c.ID, errdefs.ErrNotImplemented)
	}
	host, err := deps.HostProcess()
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	var acquired resources
	defer undoCreate(ctx, deps, c.ID, &acquired, &retErr)

	jr := &jobResources{host: host, rec: jobRecord{Job: c.ID}}
	state := &bundleState{Layers: c.Chain, Job: &jr.rec}
	record := func() error { return writeState(c.Bundle, state) }
	if err := record(); err != nil {
		return nil, err
	}
	acquired.bundle, acquired.job = c.Bundle, jr

	cctx, cancel := context.WithTimeout(ctx, deps.createTimeout())
	defer cancel()
	job, err := host.CreateJob(cctx, c.ID, c.Limits)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	sys := &jobSystem{id: c.ID, job: job, location: c.Location, limits: c.Limits, exited: make(chan struct{})}
	acquired.sys = sys

	volume, err := deps.Mounter.Mount(cctx, c.Chain)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	acquired.chain = c.Chain

	bind := func(path, target string, readOnly bool) error {
		jr.rec.Bindings = append(jr.rec.Bindings, path)
		if err := record(); err != nil {
			return err
		}
		return host.Bind(cctx, path, target, readOnly)
	}
	if err := bind(c.Location, volume, false); err != nil {
		return nil, fmt.Errorf("task %s: the image's files: %w", c.ID, err)
	}
	// Mounts are bound below the files' own mapping. Assumption: the bind filter resolves a
	// mapping whose root lies inside another mapping (Microsoft does not document nesting;
	// hcsshim's silo mode binds mounts at their own paths, its fallback mode symlinks them).
	for i, m := range c.Mounts {
		path, err := hostprocess.MountPath(c.Location, m.Destination)
		if err != nil {
			return nil, fmt.Errorf("task %s: mounts[%d].destination: %w", c.ID, i, err)
		}
		ro := false
		for _, o := range m.Options {
			ro = ro || strings.EqualFold(o, "ro")
		}
		if err := bind(path, m.Source, ro); err != nil {
			return nil, fmt.Errorf("task %s: mounts[%d] (%s): %w", c.ID, i, m.Destination, err)
		}
	}

	account := ""
	if !c.InheritUser {
		// Recorded before Logon makes it; deleting an account that was never made is done.
		account = tempAccountName(c.ID)
		jr.rec.Account = account
		if err := record(); err != nil {
			return nil, err
		}
	}
	tok, err := host.Logon(cctx, c.Process.User.Username, account, c.InheritUser)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	sys.token = tok
	if err := sys.Start(cctx); err != nil {
		return nil, err
	}

	t := &JobContainer{systemTask: newSystemTask(deps, Config{ID: c.ID, Bundle: c.Bundle}, sys, acquired)}
	t.init = newProcess(t, "", c.Process, c.IO)
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "job": hostprocess.JobName(c.ID), "location": c.Location}).Info("HostProcess container created")
	return t, nil
}

// jobSystem is a HostProcess container's job, answering as the compute system of a
// container does (System), so that the processes, stats, pids and updates of systemTask work
// on it unchanged.
type jobSystem struct {
	id       string
	job      hostprocess.Job
	token    hostprocess.Token
	location string

	mu      sync.Mutex // guards limits, started
	limits  hostprocess.Limits
	started time.Time

	exitOnce sync.Once
	exited   chan struct{}
}

var _ System = (*jobSystem)(nil)

func (s *jobSystem) ID() string { return s.id }

// Start marks the container started (a job has nothing to start; its uptime counts from here).
func (s *jobSystem) Start(context.Context) error {
	s.mu.Lock()
	s.started = time.Now()
	s.mu.Unlock()
	return nil
}

// Terminate ends every process of the job; the system counts as exited from then on.
func (s *jobSystem) Terminate(ctx context.Context) error {
	err := s.job.Terminate(ctx)
	s.exitOnce.Do(func() { close(s.exited) })
	return err
}

func (s *jobSystem) Pause(context.Context) error {
	return fmt.Errorf("pause HostProcess container %s: a job object's processes cannot be suspended through a documented API: %w", s.id, errdefs.ErrNotImplemented)
}

func (s *jobSystem) Resume(context.Context) error {
	return fmt.Errorf("resume HostProcess container %s: it cannot be paused: %w", s.id, errdefs.ErrNotImplemented)
}

// Properties answers the statistics and process list queries from the job.
func (s *jobSystem) Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error) {
	out := &schema2.Properties{Id: s.id}
	for _, t := range types {
		switch t {
		case schema2.PropertyTypeStatistics:
			st, err := s.job.Stats(ctx)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			st.ContainerStartTime, st.Uptime100ns = s.started, hostprocess.Uptime(s.started)
			s.mu.Unlock()
			out.Statistics = st
		case schema2.PropertyTypeProcessList:
			pids, err := s.job.Pids(ctx)
			if err != nil {
				return nil, err
			}
			out.ProcessList = []schema2.ProcessDetails{}
			for _, pid := range pids {
				out.ProcessList = append(out.ProcessList, schema2.ProcessDetails{ProcessId: pid})
			}
		default:
			return nil, fmt.Errorf("HostProcess container %s: property %q: %w", s.id, t, errdefs.ErrNotImplemented)
		}
	}
	return out, nil
}

// Modify applies the processor and memory updates oci.UpdateRequests makes for a silo to the
// job's limits instead.
func (s *jobSystem) Modify(ctx context.Context, req *schema2.ModifySettingRequest) error {
	s.mu.Lock()
	l := s.limits
	s.mu.Unlock()
	switch set := req.Settings.(type) {
	case *schema2.Processor:
		if req.ResourcePath != schema2.ResourcePathContainerProcessor {
			break
		}
		l.CPUCount, l.CPUMaximum, l.CPUWeight = set.Count, uint32(set.Maximum), uint32(set.Weight)
		return s.setLimits(ctx, l)
	case uint64:
		if req.ResourcePath != schema2.ResourcePathContainerMemory {
			break
		}
		l.MemoryBytes = set * 1024 * 1024
		return s.setLimits(ctx, l)
	}
	return fmt.Errorf("HostProcess container %s: modify %s: %w", s.id, req.ResourcePath, errdefs.ErrNotImplemented)
}

func (s *jobSystem) setLimits(ctx context.Context, l hostprocess.Limits) error {
	if err := s.job.SetLimits(ctx, l); err != nil {
		return err
	}
	s.mu.Lock()
	s.limits = l
	s.mu.Unlock()
	return nil
}

// CreateProcess starts a process in the job, as the container's account, with
// %CONTAINER_SANDBOX_MOUNT_POINT% expanded in its command line, working directory and
// environment, and the variable itself set (hostprocess.Environment). Execs run as the init
// process's account, as in hcsshim (the token is made once).
func (s *jobSystem) CreateProcess(ctx context.Context, p *schema2.ProcessParameters) (HCSProcess, error) {
	cmd, _ := hostprocess.ExpandMountPoint(p.CommandLine, s.location)
	spec := &hostprocess.ProcessSpec{
		CommandLine: cmd,
		Dir:         hostprocess.WorkingDir(p.WorkingDirectory, s.location),
		Env:         hostprocess.Environment(p.Environment, s.location),
		PathSuffix:  hostprocess.PathSuffix(s.location),
		Token:       s.token,
		Terminal:    p.EmulateConsole,
		Stdin:       p.CreateStdInPipe,
		Stdout:      p.CreateStdOutPipe,
		Stderr:      p.CreateStdErrPipe,
	}
	spec.Height, spec.Width = p.ConsoleSize[0], p.ConsoleSize[1]
	proc, err := s.job.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return proc, nil
}

func (s *jobSystem) Exited() <-chan struct{} { return s.exited }

// Close releases the token and the job's handle.
func (s *jobSystem) Close() error {
	if s.token != nil {
		_ = s.token.Close()
	}
	return s.job.Close()
}
