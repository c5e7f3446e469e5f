package shim

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// Version is reported by Connect.
const Version = "runhcs-shim-v1"

// service is the task service of one shim, that is of one pod: every task in it.
type service struct {
	ctx       context.Context // lives as long as the shim
	namespace string
	host      hcsHost
	layers    layerMounter
	hns       hnsDialer
	events    *eventQueue
	shutdown  shutdown.Service

	mu       sync.Mutex
	tasks    map[string]*task
	creating map[string]struct{} // ids being created, reserved without holding mu across HCS calls
}

var _ taskapi.TTRPCTaskService = (*service)(nil)

func newService(ctx context.Context, host hcsHost, lm layerMounter, publisher events.Publisher, sd shutdown.Service) *service {
	ns, _ := namespaces.Namespace(ctx)
	s := &service{
		ctx:       ctx,
		namespace: ns,
		host:      host,
		layers:    lm,
		hns:       defaultHNS,
		events:    newEventQueue(ctx, publisher),
		shutdown:  sd,
		tasks:     map[string]*task{},
		creating:  map[string]struct{}{},
	}
	if sd != nil {
		sd.RegisterCallback(func(context.Context) error {
			s.events.close()
			return nil
		})
	}
	return s
}

func (s *service) get(id string) (*task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %q: %w", id, errdefs.ErrNotFound)
	}
	return t, nil
}

func (s *service) getProcess(id, execID string) (*task, *process, error) {
	t, err := s.get(id)
	if err != nil {
		return nil, nil, err
	}
	p, err := t.process(execID)
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

func (s *service) Create(ctx context.Context, req *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	if req.Checkpoint != "" || req.ParentCheckpoint != "" {
		return nil, fmt.Errorf("create %s from a checkpoint: Windows containers cannot be checkpointed: %w", req.ID, errdefs.ErrNotImplemented)
	}
	s.mu.Lock()
	if _, ok := s.tasks[req.ID]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("task %q: %w", req.ID, errdefs.ErrAlreadyExists)
	}
	if _, ok := s.creating[req.ID]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("task %q is being created: %w", req.ID, errdefs.ErrAlreadyExists)
	}
	s.creating[req.ID] = struct{}{}
	s.mu.Unlock()

	t, err := s.createTask(ctx, req)

	s.mu.Lock()
	delete(s.creating, req.ID)
	if err == nil {
		s.tasks[req.ID] = t
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.events.send(runtime.TaskCreateEventTopic, &eventstypes.TaskCreate{
		ContainerID: req.ID,
		Bundle:      req.Bundle,
		Rootfs:      req.Rootfs,
		IO:          &eventstypes.TaskIO{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal},
		Pid:         0,
	})
	// The init process of a Windows container exists only once started: its pid is 0 until then.
	return &taskapi.CreateTaskResponse{Pid: 0}, nil
}

func (s *service) Start(ctx context.Context, req *taskapi.StartRequest) (*taskapi.StartResponse, error) {
	t, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	pid, err := p.start(ctx)
	if err != nil {
		return nil, err
	}
	var beforeExit func(context.Context)
	if req.ExecID == "" {
		if err := recordInitPid(t.bundle, pid); err != nil {
			// Only the delete action's report of the pid after a shim crash depends on it.
			log.G(ctx).WithError(err).WithField("task", t.id).Warn("recording the init pid in the task state")
		}
		s.events.send(runtime.TaskStartEventTopic, &eventstypes.TaskStart{ContainerID: t.id, Pid: pid})
		beforeExit = t.afterInitExit
	} else {
		s.events.send(runtime.TaskExecStartedEventTopic, &eventstypes.TaskExecStarted{ContainerID: t.id, ExecID: req.ExecID, Pid: pid})
	}
	// Watch only once the start event is queued, so a fast exit cannot overtake it.
	go p.watch(log.WithLogger(s.ctx, p.logger(s.ctx)), beforeExit)
	return &taskapi.StartResponse{Pid: pid}, nil
}

func (s *service) State(ctx context.Context, req *taskapi.StateRequest) (*taskapi.StateResponse, error) {
	t, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	st := p.status()
	resp := &taskapi.StateResponse{
		ID:         p.id(),
		Bundle:     t.bundle,
		Pid:        st.pid,
		Status:     st.state.Status(),
		Stdin:      p.io.Stdin,
		Stdout:     p.io.Stdout,
		Stderr:     p.io.Stderr,
		Terminal:   p.io.Terminal,
		ExitStatus: st.exitStatus,
		ExecID:     req.ExecID,
	}
	if !st.exitedAt.IsZero() {
		resp.ExitedAt = timestamppb.New(st.exitedAt)
	}
	return resp, nil
}

func (s *service) Delete(ctx context.Context, req *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	t, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	if req.ExecID != "" {
		p.mu.Lock()
		next, err := p.state.delete()
		if err == nil {
			p.state = next
		}
		p.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("delete exec %q of task %s: %w", req.ExecID, t.id, err)
		}
		t.removeExec(req.ExecID)
		st := p.status()
		if st.exitedAt.IsZero() {
			// Deleted without ever running.
			st.exitedAt = time.Now()
		}
		return &taskapi.DeleteResponse{Pid: st.pid, ExitStatus: st.exitStatus, ExitedAt: timestamppb.New(st.exitedAt)}, nil
	}

	p.mu.Lock()
	_, err = p.state.delete()
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("delete task %s: %w", t.id, err)
	}
	for _, e := range t.execList() {
		if _, ok := e.status().state.(stoppedState); !ok {
			if _, ok := e.status().state.(createdState); !ok {
				return nil, fmt.Errorf("delete task %s: exec %q is still %s: %w", t.id, e.execID, e.status().state, errdefs.ErrFailedPrecondition)
			}
		}
	}
	if err := t.cleanup(ctx); err != nil {
		return nil, fmt.Errorf("delete task %s: %w", t.id, err)
	}
	p.mu.Lock()
	if next, err := p.state.delete(); err == nil {
		p.state = next
	}
	st := processStatus{state: p.state, pid: p.pid, exitStatus: p.exitStatus, exitedAt: p.exitedAt}
	p.mu.Unlock()
	if st.exitedAt.IsZero() {
		// Deleted without ever running (created, then deleted).
		st.exitedAt = time.Now()
	}
	s.mu.Lock()
	delete(s.tasks, t.id)
	s.mu.Unlock()
	s.events.send(runtime.TaskDeleteEventTopic, &eventstypes.TaskDelete{
		ContainerID: t.id,
		ID:          t.id,
		Pid:         st.pid,
		ExitStatus:  st.exitStatus,
		ExitedAt:    timestamppb.New(st.exitedAt),
	})
	return &taskapi.DeleteResponse{Pid: st.pid, ExitStatus: st.exitStatus, ExitedAt: timestamppb.New(st.exitedAt)}, nil
}

func (s *service) Pids(ctx context.Context, req *taskapi.PidsRequest) (*taskapi.PidsResponse, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	execOf := map[uint32]string{}
	for _, e := range t.execList() {
		if st := e.status(); st.pid != 0 {
			execOf[st.pid] = e.execID
		}
	}
	// Pids must answer quickly even when HCS is stuck: bound the query and fall back to the
	// processes the shim itself started.
	cctx, cancel := context.WithTimeout(ctx, quickTimeout)
	defer cancel()
	props, err := t.sys.Properties(cctx, schema2.PropertyTypeProcessList)
	if err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("process list from HCS unavailable; listing the shim's own processes")
		var resp taskapi.PidsResponse
		if pid := t.init.status().pid; pid != 0 {
			resp.Processes = append(resp.Processes, &tasktypes.ProcessInfo{Pid: pid})
		}
		for pid := range execOf {
			resp.Processes = append(resp.Processes, &tasktypes.ProcessInfo{Pid: pid})
		}
		return &resp, nil
	}
	var resp taskapi.PidsResponse
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
		resp.Processes = append(resp.Processes, &tasktypes.ProcessInfo{Pid: d.ProcessId, Info: info})
	}
	return &resp, nil
}

func (s *service) Pause(ctx context.Context, req *taskapi.PauseRequest) (*emptypb.Empty, error) {
	return s.pauseResume(ctx, req.ID, true)
}

func (s *service) Resume(ctx context.Context, req *taskapi.ResumeRequest) (*emptypb.Empty, error) {
	return s.pauseResume(ctx, req.ID, false)
}

func (s *service) pauseResume(ctx context.Context, id string, pause bool) (*emptypb.Empty, error) {
	t, err := s.get(id)
	if err != nil {
		return nil, err
	}
	p := t.init
	op, transition, call := "resume", procState.resume, t.sys.Resume
	if pause {
		op, transition, call = "pause", procState.pause, t.sys.Pause
	}
	p.mu.Lock()
	from := p.state
	next, err := transition(from)
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s task %s: %w", op, id, err)
	}
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	if err := call(cctx); err != nil {
		return nil, fmt.Errorf("%s compute system %q: %w", op, id, err)
	}
	p.mu.Lock()
	if p.state == from {
		p.state = next
	}
	p.mu.Unlock()
	if pause {
		s.events.send(runtime.TaskPausedEventTopic, &eventstypes.TaskPaused{ContainerID: id})
	} else {
		s.events.send(runtime.TaskResumedEventTopic, &eventstypes.TaskResumed{ContainerID: id})
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Checkpoint(ctx context.Context, req *taskapi.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return nil, fmt.Errorf("checkpoint task %s: Windows containers cannot be checkpointed (HCS has no checkpoint/restore for process-isolated containers): %w", req.ID, errdefs.ErrNotImplemented)
}

func (s *service) Kill(ctx context.Context, req *taskapi.KillRequest) (*emptypb.Empty, error) {
	t, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	if _, err := signalAction(req.Signal); err != nil {
		return nil, fmt.Errorf("kill %s: %w", p.id(), err)
	}
	if req.All && req.ExecID == "" {
		// Every exec first, then the init process.
		for _, e := range t.execList() {
			if err := e.kill(ctx, req.Signal); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
				return nil, err
			}
		}
	}
	if err := p.kill(ctx, req.Signal); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Exec(ctx context.Context, req *taskapi.ExecProcessRequest) (*emptypb.Empty, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	if req.ExecID == "" {
		return nil, fmt.Errorf("exec in task %s: exec id is empty: %w", req.ID, errdefs.ErrInvalidArgument)
	}
	spec, err := decodeProcessSpec(req.Spec)
	if err != nil {
		return nil, fmt.Errorf("exec %q in task %s: %w", req.ExecID, req.ID, err)
	}
	spec.Terminal = req.Terminal
	if _, err := oci.ProcessParameters(spec, oci.Stdio{}); err != nil {
		return nil, fmt.Errorf("exec %q in task %s: %w", req.ExecID, req.ID, err)
	}
	if _, err := t.addExec(req.ExecID, spec, stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal}); err != nil {
		return nil, err
	}
	s.events.send(runtime.TaskExecAddedEventTopic, &eventstypes.TaskExecAdded{ContainerID: req.ID, ExecID: req.ExecID})
	return &emptypb.Empty{}, nil
}

func decodeProcessSpec(a *anypb.Any) (*specs.Process, error) {
	if a == nil {
		return nil, fmt.Errorf("spec: missing: %w", errdefs.ErrInvalidArgument)
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return nil, fmt.Errorf("spec of type %q: %v: %w", a.GetTypeUrl(), err, errdefs.ErrInvalidArgument)
	}
	p, ok := v.(*specs.Process)
	if !ok {
		return nil, fmt.Errorf("spec: got %T, want an OCI process: %w", v, errdefs.ErrInvalidArgument)
	}
	return p, nil
}

func (s *service) ResizePty(ctx context.Context, req *taskapi.ResizePtyRequest) (*emptypb.Empty, error) {
	_, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	if err := p.resize(ctx, req.Width, req.Height); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) CloseIO(ctx context.Context, req *taskapi.CloseIORequest) (*emptypb.Empty, error) {
	_, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	if req.Stdin {
		if err := p.closeIO(ctx); err != nil {
			return nil, err
		}
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Update(ctx context.Context, req *taskapi.UpdateTaskRequest) (*emptypb.Empty, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	if req.Resources == nil {
		return nil, fmt.Errorf("update task %s: no resources: %w", req.ID, errdefs.ErrInvalidArgument)
	}
	v, err := typeurl.UnmarshalAny(req.Resources)
	if err != nil {
		return nil, fmt.Errorf("update task %s: resources of type %q: %v: %w", req.ID, req.Resources.GetTypeUrl(), err, errdefs.ErrInvalidArgument)
	}
	res, ok := v.(*specs.WindowsResources)
	if !ok {
		return nil, fmt.Errorf("update task %s: resources are %T, want Windows resources: %w", req.ID, v, errdefs.ErrInvalidArgument)
	}
	reqs, err := oci.UpdateRequests(res)
	if err != nil {
		return nil, fmt.Errorf("update task %s: %w", req.ID, err)
	}
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	for _, m := range reqs {
		if err := t.sys.Modify(cctx, m); err != nil {
			return nil, fmt.Errorf("update task %s: %s: %w", req.ID, m.ResourcePath, err)
		}
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Wait(ctx context.Context, req *taskapi.WaitRequest) (*taskapi.WaitResponse, error) {
	_, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	st, err := p.wait(ctx)
	if err != nil {
		return nil, err
	}
	return &taskapi.WaitResponse{ExitStatus: st.exitStatus, ExitedAt: timestamppb.New(st.exitedAt)}, nil
}

func (s *service) Stats(ctx context.Context, req *taskapi.StatsRequest) (*taskapi.StatsResponse, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	props, err := t.sys.Properties(cctx, schema2.PropertyTypeStatistics)
	if err != nil {
		return nil, fmt.Errorf("stats of task %s: %w", req.ID, err)
	}
	if props.Statistics == nil {
		return nil, fmt.Errorf("stats of task %s: HCS returned no statistics: %w", req.ID, errdefs.ErrUnavailable)
	}
	a, err := typeurl.MarshalAnyToProto(toStats(props.Statistics))
	if err != nil {
		return nil, err
	}
	return &taskapi.StatsResponse{Stats: a}, nil
}

// toStats converts HCS statistics (times in 100ns units) to containerd.runhcs.stats.v1
// (times in ns), as hcsshim does.
func toStats(st *schema2.Statistics) *stats.Statistics {
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

func (s *service) Connect(ctx context.Context, req *taskapi.ConnectRequest) (*taskapi.ConnectResponse, error) {
	resp := &taskapi.ConnectResponse{ShimPid: uint32(os.Getpid()), Version: Version}
	if t, err := s.get(req.ID); err == nil {
		resp.TaskPid = t.init.status().pid
	}
	return resp, nil
}

func (s *service) Shutdown(ctx context.Context, req *taskapi.ShutdownRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	n := len(s.tasks) + len(s.creating)
	s.mu.Unlock()
	// One shim serves a pod: it stays while any task of the pod is left.
	if n > 0 {
		return &emptypb.Empty{}, nil
	}
	if s.shutdown != nil {
		s.shutdown.Shutdown()
	}
	return &emptypb.Empty{}, nil
}
