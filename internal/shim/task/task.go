package task

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/uvm"
	"github.com/openhcs/runhcs/protocols/options"
)

// execsExitTimeout bounds how long the end of the init process waits for the execs it killed.
const execsExitTimeout = 30 * time.Second

// Task is a process-isolated Windows container: its compute system, its mounted layers, its
// init process and its execs.
type Task struct {
	deps   Deps
	id     string
	bundle string
	chain  *layers.Chain
	// netns and endpoints are the HNS namespace made for Config.Endpoints ("" if none).
	netns     string
	endpoints []string
	ccg       string // the Container Credential Guard instance (ccg.go), "" if none
	sys       System
	init      *Process
	// vm is the pod's utility VM: owned by a sandbox task (sandbox), borrowed by a hosted
	// container, whose borrowings vmRelease gives back (uvm.go). nil for process isolation.
	vm        *uvm.VM
	sandbox   bool
	vmRelease []func(context.Context) error
	// sboxCtr is a Hyper-V sandbox's container for execs (sandboxexec.go), nil for other tasks.
	sboxCtr *sandboxContainer

	mu    sync.Mutex
	execs map[string]*Process
}

// Config is a task to create, already translated by the caller: its compute system document
// (whose storage path Create fills in once the layers are mounted), its layer chain and its
// init process.
type Config struct {
	ID, Bundle string
	Chain      *layers.Chain
	Document   *schema2.ComputeSystem
	Process    *specs.Process
	IO         stdio.Config
	// Endpoints, when set, are put in an HNS namespace made for the task, which the document
	// then names (the spec listed endpoints but no namespace; see network.go).
	Endpoints []string
	// Hosted, when set, puts the container in its pod's utility VM (uvm.go).
	Hosted *HostedConfig
	// CredentialSpec, when set, is the gMSA credential spec (checked JSON) the container gets
	// through a Container Credential Guard instance (ccg.go).
	CredentialSpec string
}

// Create mounts the layers and creates and starts the compute system of c (a Windows silo
// must run before processes can be created in it; Start then creates the init process). On
// failure it releases what it acquired, in reverse order, and leaves no state behind.
func Create(ctx context.Context, deps Deps, c Config) (_ *Task, retErr error) {
	logger := log.G(ctx).WithField("task", c.ID)
	var acquired resources
	defer func() {
		if retErr == nil {
			return
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deps.callTimeout())
		defer cancel()
		if err := release(uctx, deps, acquired); err != nil {
			logger.WithError(err).Error("undo failed create")
		}
	}()

	// Record what is about to exist before it exists, so the delete action can clean up
	// after a crash at any point from here on.
	state := &bundleState{SystemID: c.ID, Layers: c.Chain}
	if c.Hosted != nil {
		state.Layers = nil // shared into the VM, not mounted on the host: they go with it
		if c.Hosted.OwnsVM {
			state.VMID = c.Hosted.VM.ID()
		}
	}
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	acquired.bundle = c.Bundle

	if c.Hosted != nil {
		return createHostedTask(ctx, deps, c, state, &acquired)
	}
	if c.CredentialSpec != "" {
		if _, err := addCCG(ctx, deps, c, state, &acquired, schema2.CCGTransportLRPC); err != nil {
			return nil, err
		}
	}

	if len(c.Endpoints) > 0 {
		if deps.HNS == nil {
			return nil, fmt.Errorf("task %s: windows.network.endpointList: no HNS to make a namespace with: %w", c.ID, errdefs.ErrNotImplemented)
		}
		hctx, cancel := context.WithTimeout(ctx, deps.callTimeout())
		ns, err := createNamespace(hctx, deps.HNS, c.Endpoints, func(id string) error {
			state.Namespace, state.Endpoints = id, c.Endpoints
			return writeState(c.Bundle, state)
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", c.ID, err)
		}
		acquired.namespace, acquired.endpoints = ns, c.Endpoints
		c.Document.Container.Networking.Namespace = ns
		c.Document.Container.Networking.NetworkAdapters = nil
	}

	volume, err := deps.Mounter.Mount(ctx, c.Chain)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	acquired.chain = c.Chain
	c.Document.Container.Storage.Path = volume

	cctx, cancel := context.WithTimeout(ctx, deps.createTimeout())
	defer cancel()
	sys, err := deps.Host.CreateComputeSystem(cctx, c.ID, c.Document)
	if err != nil {
		return nil, fmt.Errorf("create compute system %q: %w", c.ID, err)
	}
	// The id too: when the handle cannot terminate it, the undo opens the system by id.
	acquired.sys, acquired.systemID = sys, c.ID
	if err := sys.Start(cctx); err != nil {
		return nil, fmt.Errorf("start compute system %q: %w", c.ID, err)
	}
	t := &Task{deps: deps, id: c.ID, bundle: c.Bundle, chain: c.Chain, netns: acquired.namespace, endpoints: acquired.endpoints, ccg: acquired.ccg, sys: sys, execs: map[string]*Process{}}
	t.init = newProcess(t, "", c.Process, c.IO)
	logger.WithField("volume", volume).Info("compute system created")
	return t, nil
}

// createHostedTask is the rest of Create for a container in a utility VM (uvm.go).
func createHostedTask(ctx context.Context, deps Deps, c Config, state *bundleState, acquired *resources) (*Task, error) {
	sys, err := createHosted(ctx, deps, c, state, acquired)
	if err != nil {
		return nil, err
	}
	acquired.sys = sys
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	if err := sys.Start(cctx); err != nil {
		return nil, fmt.Errorf("start compute system %q in utility VM %s: %w", c.ID, c.Hosted.VM.ID(), err)
	}
	t := &Task{deps: deps, id: c.ID, bundle: c.Bundle, sys: sys, vm: c.Hosted.VM, vmRelease: acquired.vmRelease,
		netns: acquired.namespace, endpoints: acquired.endpoints, ccg: acquired.ccg, execs: map[string]*Process{}}
	t.init = newProcess(t, "", c.Process, c.IO)
	go t.watchVM(deps.Ctx)
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": c.Hosted.VM.ID()}).Info("compute system created in the utility VM")
	return t, nil
}

// ID is the task's (and its compute system's) id.
func (t *Task) ID() string { return t.id }

// Bundle is the task's bundle folder.
func (t *Task) Bundle() string { return t.bundle }

// Init is the task's init process.
func (t *Task) Init() *Process { return t.init }

func (t *Task) exitGrace() time.Duration {
	return cmp.Or(t.deps.ExitGrace, DefaultExitGrace)
}

// Process returns the init process (execID "") or the exec execID.
func (t *Task) Process(execID string) (*Process, error) {
	if execID == "" {
		return t.init, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.execs[execID]
	if !ok {
		return nil, fmt.Errorf("exec %q of task %s: %w", execID, t.id, errdefs.ErrNotFound)
	}
	return p, nil
}

// Execs returns the task's execs, by exec id.
func (t *Task) Execs() []*Process {
	t.mu.Lock()
	out := slices.Collect(maps.Values(t.execs))
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b *Process) int { return cmp.Compare(a.execID, b.execID) })
	return out
}

// Exec adds the exec execID, created, not started; the task's init process must be running.
func (t *Task) Exec(execID string, spec *specs.Process, io stdio.Config) error {
	if t.sandbox && t.sboxCtr == nil {
		// Made without its container (sandboxexec.go): as hcsshim's wcowPodSandboxTask.CreateExec.
		return fmt.Errorf("exec %q in task %s: the sandbox of a Hyper-V pod is its utility VM, not a container (use shimdiag exec): %w", execID, t.id, errdefs.ErrNotImplemented)
	}
	if err := t.init.ask(procState.canExec); err != nil {
		return fmt.Errorf("exec %q in task %s: %w", execID, t.id, err)
	}
	t.mu.Lock()
	if _, ok := t.execs[execID]; ok {
		t.mu.Unlock()
		return fmt.Errorf("exec %q in task %s: %w", execID, t.id, errdefs.ErrAlreadyExists)
	}
	t.execs[execID] = newProcess(t, execID, spec, io)
	t.mu.Unlock()
	t.deps.Events.Send(runtime.TaskExecAddedEventTopic, &eventstypes.TaskExecAdded{ContainerID: t.id, ExecID: execID})
	return nil
}

// Start starts the init process (execID "") or an exec, publishes its start and watches for
// its exit.
func (t *Task) Start(ctx context.Context, execID string) (uint32, error) {
	p, err := t.Process(execID)
	if err != nil {
		return 0, err
	}
	pid, err := p.start(ctx)
	if err != nil {
		return 0, err
	}
	var beforeExit func(context.Context)
	if execID == "" {
		if err := recordInitPid(t.bundle, pid); err != nil {
			// Only the delete action's report of the pid after a shim crash depends on it.
			log.G(ctx).WithError(err).WithField("task", t.id).Warn("recording the init pid in the task state")
		}
		t.deps.Events.Send(runtime.TaskStartEventTopic, &eventstypes.TaskStart{ContainerID: t.id, Pid: pid})
		beforeExit = t.afterInitExit
	} else {
		t.deps.Events.Send(runtime.TaskExecStartedEventTopic, &eventstypes.TaskExecStarted{ContainerID: t.id, ExecID: execID, Pid: pid})
	}
	// Watch only once the start event is queued, so a fast exit cannot overtake it.
	sctx := t.deps.Ctx
	go p.watch(log.WithLogger(sctx, p.logger(sctx)), beforeExit)
	return pid, nil
}

// Kill signals the init process (execID "") or an exec; with all, every exec first, then the
// init process.
func (t *Task) Kill(ctx context.Context, execID string, sig uint32, all bool) error {
	p, err := t.Process(execID)
	if err != nil {
		return err
	}
	if _, err := signalAction(sig); err != nil {
		return fmt.Errorf("kill %s: %w", p.ID(), err)
	}
	if all && execID == "" {
		for _, e := range t.Execs() {
			if err := e.kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
				return err
			}
		}
	}
	return p.kill(ctx, sig)
}

// Pause pauses the compute system; the init process goes from running to paused.
func (t *Task) Pause(ctx context.Context) error {
	err := t.pauseResume(ctx, "pause", procState.pause, t.sys.Pause)
	if err == nil {
		t.deps.Events.Send(runtime.TaskPausedEventTopic, &eventstypes.TaskPaused{ContainerID: t.id})
	}
	return err
}

// Resume resumes the compute system; the init process goes from paused to running.
func (t *Task) Resume(ctx context.Context) error {
	err := t.pauseResume(ctx, "resume", procState.resume, t.sys.Resume)
	if err == nil {
		t.deps.Events.Send(runtime.TaskResumedEventTopic, &eventstypes.TaskResumed{ContainerID: t.id})
	}
	return err
}

// pauseResume checks the transition, makes the HCS call without the lock, and commits the
// transition unless the state changed meanwhile (the process exited: stopped wins).
func (t *Task) pauseResume(ctx context.Context, op string, transition func(procState) (procState, error), call func(context.Context) error) error {
	from, err := t.init.check(transition)
	if err != nil {
		return fmt.Errorf("%s task %s: %w", op, t.id, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := call(cctx); err != nil {
		return fmt.Errorf("%s compute system %q: %w", op, t.id, err)
	}
	t.init.commitFrom(from, transition)
	return nil
}

// Delete deletes an exec (execID not "") or, for "", the task: its compute system is
// terminated, its layers unmounted and its state removed; then the init process is deleted.
// It returns the deleted process's final status. A task whose execs are still live is not
// deleted. The caller forgets the task once Delete of the init process succeeds.
func (t *Task) Delete(ctx context.Context, execID string) (Status, error) {
	p, err := t.Process(execID)
	if err != nil {
		return Status{}, err
	}
	if execID != "" {
		st, err := p.delete()
		if err != nil {
			return Status{}, fmt.Errorf("delete exec %q of task %s: %w", execID, t.id, err)
		}
		t.mu.Lock()
		delete(t.execs, execID)
		t.mu.Unlock()
		return st, nil
	}

	// Checked now, committed once the resources are released.
	if _, err := p.check(procState.delete); err != nil {
		return Status{}, fmt.Errorf("delete task %s: %w", t.id, err)
	}
	for _, e := range t.Execs() {
		if err := e.ask(procState.canDeleteTask); err != nil {
			return Status{}, fmt.Errorf("delete task %s: exec %q: %w", t.id, e.execID, err)
		}
	}
	if err := t.cleanup(ctx); err != nil {
		return Status{}, fmt.Errorf("delete task %s: %w", t.id, err)
	}
	st, err := p.delete()
	if err != nil {
		// Deleted twice concurrently: the other Delete committed it first.
		p.logger(ctx).WithError(err).Debug("delete")
	}
	return st, nil
}

// afterInitExit runs when the init process exited, before its exit is published: as in
// hcsshim, the container ends with its init process, so the execs are killed (and their
// exits published first; an exec never started ends at once) and the compute system is
// terminated.
func (t *Task) afterInitExit(ctx context.Context) {
	deadline := time.After(execsExitTimeout)
	for _, p := range t.Execs() {
		if p.exited() {
			continue
		}
		if err := p.kill(ctx, sigKILL); err != nil && !errdefs.IsNotFound(err) {
			p.logger(ctx).WithError(err).Warn("kill exec after init exit")
		}
		select {
		case <-p.done:
		case <-deadline:
			p.logger(ctx).Error("exec did not exit after its container's init process")
		}
	}
	tctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := terminateSystem(tctx, t.deps.Host, t.sys, t.sys.ID()); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("terminate compute system after init exit")
	}
}

// cleanup releases the compute system, the layers and the task's state. It is idempotent; a
// failure is returned and retried by the next call.
func (t *Task) cleanup(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	// A Hyper-V sandbox's container for execs goes before its VM.
	if err := t.releaseSandboxContainer(cctx); err != nil {
		return err
	}
	return release(cctx, t.deps, resources{sys: t.sys, systemID: t.sys.ID(), chain: t.chain, bundle: t.bundle, namespace: t.netns, endpoints: t.endpoints, ccg: t.ccg, vmRelease: t.vmRelease})
}

// Pids lists the processes of the task's compute system, with their details and exec ids. It
// answers quickly even when HCS is stuck: the query is bounded, and without an answer the
// processes the shim itself started are listed.
func (t *Task) Pids(ctx context.Context) ([]*tasktypes.ProcessInfo, error) {
	execOf := map[uint32]string{}
	for _, e := range t.Execs() {
		if st := e.Status(); st.Pid != 0 {
			execOf[st.Pid] = e.execID
		}
	}
	cctx, cancel := context.WithTimeout(ctx, QuickTimeout)
	defer cancel()
	props, err := t.sys.Properties(cctx, schema2.PropertyTypeProcessList)
	if err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("process list from HCS unavailable; listing the shim's own processes")
		var out []*tasktypes.ProcessInfo
		if pid := t.init.Status().Pid; pid != 0 {
			out = append(out, &tasktypes.ProcessInfo{Pid: pid})
		}
		for pid := range execOf {
			out = append(out, &tasktypes.ProcessInfo{Pid: pid})
		}
		return out, nil
	}
	var out []*tasktypes.ProcessInfo
	for _, d := range props.ProcessList {
		details := &options.ProcessDetails{
			ImageName:                    d.ImageName,
			KernelTime_100Ns:             d.KernelTime100ns,
			MemoryCommitBytes:            d.MemoryCommitBytes,
			MemoryWorkingSetPrivateBytes: d.MemoryWorkingSetPrivateBytes,
			MemoryWorkingSetSharedBytes:  d.MemoryWorkingSetSharedBytes,
			ProcessId:                    d.ProcessId,
			UserTime_100Ns:               d.UserTime100ns,
			ExecId:                       execOf[d.ProcessId],
		}
		if !d.CreateTimestamp.IsZero() {
			details.CreatedAt = timestamppb.New(d.CreateTimestamp)
		}
		info, err := typeurl.MarshalAnyToProto(details)
		if err != nil {
			return nil, fmt.Errorf("pids of %s: %w", t.id, err)
		}
		out = append(out, &tasktypes.ProcessInfo{Pid: d.ProcessId, Info: info})
	}
	return out, nil
}

// Update applies new CPU and memory limits to the compute system.
func (t *Task) Update(ctx context.Context, res *specs.WindowsResources) error {
	if t.sandbox {
		return t.resizeVM(ctx, res)
	}
	reqs, err := oci.UpdateRequests(res)
	if err != nil {
		return fmt.Errorf("update task %s: %w", t.id, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	for _, m := range reqs {
		if err := t.sys.Modify(cctx, m); err != nil {
			return fmt.Errorf("update task %s: %s: %w", t.id, m.ResourcePath, err)
		}
	}
	return nil
}

// Statistics returns the compute system's statistics.
func (t *Task) Statistics(ctx context.Context) (*schema2.Statistics, error) {
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	props, err := t.sys.Properties(cctx, schema2.PropertyTypeStatistics)
	if err != nil {
		return nil, fmt.Errorf("stats of task %s: %w", t.id, err)
	}
	if props.Statistics == nil {
		return nil, fmt.Errorf("stats of task %s: HCS returned no statistics: %w", t.id, errdefs.ErrUnavailable)
	}
	return props.Statistics, nil
}
