package task

import (
	"context"
	"fmt"

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
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// Config is a container to create, already translated by the caller: its compute system
// document (whose storage path is filled in once the layers are mounted or shared), its layer
// chain and its init process.
type Config struct {
	ID, Bundle string
	Chain      *layers.Chain
	Document   *schema2.ComputeSystem
	Process    *specs.Process
	IO         stdio.Config
	// Endpoints, when set, are put in an HNS namespace made for the task, which the document
	// then names (the spec listed endpoints but no namespace; see network.go).
	Endpoints []string
	// CredentialSpec, when set, is the gMSA credential spec (checked JSON) the container gets
	// through a Container Credential Guard instance (ccg.go).
	CredentialSpec string
}

// systemTask is what the kinds of task that are a container share (Container,
// HostedContainer, Standalone): a compute system with an init process and execs in it, and what
// the task holds besides (res), released together by Delete.
type systemTask struct {
	base
	sys System
	res resources
}

// newSystemTask makes the task of the created and started compute system sys, holding res.
func newSystemTask(deps Deps, c Config, sys System, res resources) systemTask {
	return systemTask{base: newBase(deps, c.ID, c.Bundle), sys: sys, res: res}
}

// setInit makes the task's init process, once the task has its final address (host).
func (t *systemTask) setInit(host processHost, c Config) {
	t.init = newProcess(host, "", c.Process, c.IO)
}

func (t *systemTask) processSystem(context.Context, string) (System, error) { return t.sys, nil }
func (t *systemTask) systemExited() <-chan struct{}                         { return t.sys.Exited() }

// afterInitExit runs when the init process exited, before its exit is published: as in
// hcsshim, the container ends with its init process, so the execs are killed (and their
// exits published first) and the compute system is terminated.
func (t *systemTask) afterInitExit(ctx context.Context) {
	t.killExecs(ctx)
	tctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := terminateSystem(tctx, t.deps.Host, t.sys, t.sys.ID()); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("terminate compute system after init exit")
	}
}

// Exec adds the exec execID, created, not started; the task's init process must be running.
func (t *systemTask) Exec(execID string, spec *specs.Process, io stdio.Config) error {
	return t.addExec(t, execID, spec, io)
}

// Start starts the init process (execID "") or an exec.
func (t *systemTask) Start(ctx context.Context, execID string) (uint32, error) {
	return t.start(ctx, execID, t.afterInitExit)
}

// Delete deletes an exec or the task: its compute system is terminated, what it holds (layers,
// namespace, Container Credential Guard instance, what it borrowed from a VM) released and its
// state removed.
func (t *systemTask) Delete(ctx context.Context, execID string) (Status, error) {
	return t.delete(ctx, execID, t.cleanup)
}

// cleanup releases the compute system and what the task holds. It is idempotent; a failure is
// returned and retried by the next call.
func (t *systemTask) cleanup(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	return release(cctx, t.deps, t.res)
}

// Pause pauses the compute system; the init process goes from running to paused.
func (t *systemTask) Pause(ctx context.Context) error {
	err := t.pauseResume(ctx, "pause", procState.pause, t.sys.Pause)
	if err == nil {
		t.deps.Events.Send(runtime.TaskPausedEventTopic, &eventstypes.TaskPaused{ContainerID: t.id})
	}
	return err
}

// Resume resumes the compute system; the init process goes from paused to running.
func (t *systemTask) Resume(ctx context.Context) error {
	err := t.pauseResume(ctx, "resume", procState.resume, t.sys.Resume)
	if err == nil {
		t.deps.Events.Send(runtime.TaskResumedEventTopic, &eventstypes.TaskResumed{ContainerID: t.id})
	}
	return err
}

// pauseResume checks the transition, makes the HCS call without the lock, and commits the
// transition unless the state changed meanwhile (the process exited: stopped wins).
func (t *systemTask) pauseResume(ctx context.Context, op string, transition func(procState) (procState, error), call func(context.Context) error) error {
	init := t.init.lifecycle()
	from, err := init.check(transition)
	if err != nil {
		return fmt.Errorf("%s task %s: %w", op, t.id, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := call(cctx); err != nil {
		return fmt.Errorf("%s compute system %q: %w", op, t.id, err)
	}
	init.commitFrom(from, transition)
	return nil
}

// Pids lists the processes of the task's compute system, with their details and exec ids. It
// answers quickly even when HCS is stuck: the query is bounded, and without an answer the
// processes the shim itself started are listed.
func (t *systemTask) Pids(ctx context.Context) ([]*tasktypes.ProcessInfo, error) {
	return processList(ctx, &t.base, t.sys.Properties)
}

// processList lists the processes of a compute system (its properties query props), with
// their details and the exec ids of b's execs.
func processList(ctx context.Context, b *base, props func(context.Context, ...schema2.PropertyType) (*schema2.Properties, error)) ([]*tasktypes.ProcessInfo, error) {
	execOf := map[uint32]string{}
	for _, e := range b.execList() {
		if st := e.Status(); st.Pid != 0 {
			execOf[st.Pid] = e.execID
		}
	}
	cctx, cancel := context.WithTimeout(ctx, QuickTimeout)
	defer cancel()
	pl, err := props(cctx, schema2.PropertyTypeProcessList)
	if err != nil {
		log.G(ctx).WithError(err).WithField("task", b.id).Warn("process list from HCS unavailable; listing the shim's own processes")
		var out []*tasktypes.ProcessInfo
		if pid := b.init.Status().Pid; pid != 0 {
			out = append(out, &tasktypes.ProcessInfo{Pid: pid})
		}
		for pid := range execOf {
			out = append(out, &tasktypes.ProcessInfo{Pid: pid})
		}
		return out, nil
	}
	var out []*tasktypes.ProcessInfo
	for _, d := range pl.ProcessList {
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
			return nil, fmt.Errorf("pids of %s: %w", b.id, err)
		}
		out = append(out, &tasktypes.ProcessInfo{Pid: d.ProcessId, Info: info})
	}
	return out, nil
}

// Update applies new CPU and memory limits to the compute system.
func (t *systemTask) Update(ctx context.Context, res *specs.WindowsResources) error {
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

// Stats returns the compute system's statistics.
func (t *systemTask) Stats(ctx context.Context) (*stats.Statistics, error) {
	cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	props, err := t.sys.Properties(cctx, schema2.PropertyTypeStatistics)
	if err != nil {
		return nil, fmt.Errorf("stats of task %s: %w", t.id, err)
	}
	if props.Statistics == nil {
		return nil, fmt.Errorf("stats of task %s: HCS returned no statistics: %w", t.id, errdefs.ErrUnavailable)
	}
	return ContainerStats(props.Statistics), nil
}

// ContainerStats converts HCS statistics (times in 100ns units) to containerd.runhcs.stats.v1
// (times in ns), as hcsshim does.
func ContainerStats(st *schema2.Statistics) *stats.Statistics {
	w := &stats.WindowsContainerStatistics{
		UptimeNs: st.Uptime100ns * 100,
	}
	if !st.Timestamp.IsZero() {
		w.Timestamp = timestamppb.New(st.Timestamp)
	}
	if !st.ContainerStartTime.IsZero() {
		w.ContainerStartTime = timestamppb.New(st.ContainerStartTime)
	}
	if p := st.Processor; p != nil {
		w.Processor = &stats.WindowsContainerProcessorStatistics{
			TotalRuntimeNs:  p.TotalRuntime100ns * 100,
			RuntimeUserNs:   p.RuntimeUser100ns * 100,
			RuntimeKernelNs: p.RuntimeKernel100ns * 100,
		}
	}
	if m := st.Memory; m != nil {
		w.Memory = &stats.WindowsContainerMemoryStatistics{
			MemoryUsageCommitBytes:            m.MemoryUsageCommitBytes,
			MemoryUsageCommitPeakBytes:        m.MemoryUsageCommitPeakBytes,
			MemoryUsagePrivateWorkingSetBytes: m.MemoryUsagePrivateWorkingSetBytes,
		}
	}
	if s := st.Storage; s != nil {
		w.Storage = &stats.WindowsContainerStorageStatistics{
			ReadCountNormalized:  s.ReadCountNormalized,
			ReadSizeBytes:        s.ReadSizeBytes,
			WriteCountNormalized: s.WriteCountNormalized,
			WriteSizeBytes:       s.WriteSizeBytes,
		}
	}
	return &stats.Statistics{Container: &stats.Statistics_Windows{Windows: w}}
}

// Container is a process-isolated Windows container: its compute system (a silo on the host),
// its mounted layers, the HNS namespace made for its endpoint list and its Container Credential
// Guard instance, if any.
type Container struct{ systemTask }

// Create mounts the layers and creates and starts the compute system of c (a Windows silo
// must run before processes can be created in it; Start then creates the init process). On
// failure it releases what it acquired, in reverse order, and leaves no state behind.
func Create(ctx context.Context, deps Deps, c Config) (_ *Container, retErr error) {
	var acquired resources
	defer undoCreate(ctx, deps, c.ID, &acquired, &retErr)

	// Record what is about to exist before it exists, so the delete action can clean up
	// after a crash at any point from here on.
	state := &bundleState{SystemID: c.ID, Layers: c.Chain}
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	acquired.bundle = c.Bundle

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
	t := &Container{newSystemTask(deps, c, sys, acquired)}
	t.setInit(t, c)
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "volume": volume}).Info("compute system created")
	return t, nil
}

// undoCreate, deferred by a create, releases what it acquired, in reverse order, when it
// failed (*retErr set).
func undoCreate(ctx context.Context, deps Deps, id string, acquired *resources, retErr *error) {
	if *retErr == nil {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deps.callTimeout())
	defer cancel()
	if err := release(uctx, deps, *acquired); err != nil {
		log.G(ctx).WithError(err).WithField("task", id).Error("undo failed create")
	}
}
