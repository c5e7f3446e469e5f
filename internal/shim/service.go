package shim

import (
	"context"
	"fmt"
	"os"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/pod"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// Version is reported by Connect.
const Version = "runhcs-shim-v1"

// service is the task service of one shim, that is of one pod (internal/shim/pod, which owns
// its tasks and its rules). It translates RPCs; the tasks and their processes own their
// lifecycle (internal/shim/task), so the service never locks a process or sets its state.
type service struct {
	deps     task.Deps // given to every task: the shim's context, host, mounter, event sink
	pod      *pod.Pod
	events   *eventQueue
	shutdown shutdown.Service
	logs     taskLogs // the log pipes of the tasks that joined this shim
	// bootImage gives a Hyper-V sandbox-API sandbox its VM's boot image (sandbox_image):
	// through containerd at its gRPC address (bootimage.go), or a fake in tests.
	bootImage func(sandboxID, ref string) (sandbox.BootImage, error)
}

var _ taskapi.TTRPCTaskService = (*service)(nil)

func newService(ctx context.Context, host task.Host, lm task.Mounter, publisher events.Publisher, sd shutdown.Service) *service {
	ns, _ := namespaces.Namespace(ctx)
	q := newEventQueue(ctx, publisher)
	s := &service{
		deps:     task.Deps{Ctx: ctx, Namespace: ns, Host: host, Mounter: lm, Events: q, HNS: task.DefaultHNS, HostProcess: hostprocess.New},
		events:   q,
		shutdown: sd,
		logs:     taskLogs{open: openTaskLog},
	}
	if g, ok := host.(task.CredentialGuards); ok {
		s.deps.CCG = g
	}
	s.pod = pod.New(&s.deps)
	s.bootImage = func(sandboxID, ref string) (sandbox.BootImage, error) {
		return nil, fmt.Errorf("sandbox %s: boot image %s: the shim was not given containerd's address: %w", sandboxID, ref, errdefs.ErrFailedPrecondition)
	}
	if sd != nil {
		sd.RegisterCallback(func(context.Context) error {
			s.events.close()
			s.logs.closeAll()
			return nil
		})
	}
	return s
}

func (s *service) get(id string) (task.Task, error) { return s.pod.Get(id) }

func (s *service) getProcess(id, execID string) (task.Task, task.Proc, error) {
	t, err := s.get(id)
	if err != nil {
		return nil, nil, err
	}
	p, err := t.Process(execID)
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

func (s *service) Create(ctx context.Context, req *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	if req.Checkpoint != "" || req.ParentCheckpoint != "" {
		return nil, fmt.Errorf("create %s from a checkpoint: Windows containers cannot be checkpointed: %w", req.ID, errdefs.ErrNotImplemented)
	}
	if err := s.pod.Reserve(req.ID); err != nil {
		return nil, err
	}

	// Served from the start: containerd waits for its dial also when the create fails.
	s.logs.serve(ctx, s.deps.Namespace, req.ID)
	t, err := s.createTask(ctx, req)

	if err != nil {
		t = nil
	}
	s.pod.Commit(req.ID, t)
	if err != nil {
		s.logs.close(req.ID)
		return nil, err
	}
	s.events.Send(runtime.TaskCreateEventTopic, &eventstypes.TaskCreate{
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
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	pid, err := t.Start(ctx, req.ExecID)
	if err != nil {
		return nil, err
	}
	return &taskapi.StartResponse{Pid: pid}, nil
}

func (s *service) State(ctx context.Context, req *taskapi.StateRequest) (*taskapi.StateResponse, error) {
	t, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	st, io := p.Status(), p.IO()
	resp := &taskapi.StateResponse{
		ID:         p.ID(),
		Bundle:     t.Bundle(),
		Pid:        st.Pid,
		Status:     st.Status,
		Stdin:      io.Stdin,
		Stdout:     io.Stdout,
		Stderr:     io.Stderr,
		Terminal:   io.Terminal,
		ExitStatus: st.ExitStatus,
		ExecID:     req.ExecID,
	}
	if !st.ExitedAt.IsZero() {
		resp.ExitedAt = timestamppb.New(st.ExitedAt)
	}
	return resp, nil
}

func (s *service) Delete(ctx context.Context, req *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	st, err := t.Delete(ctx, req.ExecID)
	if err != nil {
		return nil, err
	}
	if req.ExecID == "" {
		s.pod.Remove(t.ID())
		s.logs.close(t.ID())
		s.events.Send(runtime.TaskDeleteEventTopic, &eventstypes.TaskDelete{
			ContainerID: t.ID(),
			ID:          t.ID(),
			Pid:         st.Pid,
			ExitStatus:  st.ExitStatus,
			ExitedAt:    timestamppb.New(st.ExitedAt),
		})
	}
	return &taskapi.DeleteResponse{Pid: st.Pid, ExitStatus: st.ExitStatus, ExitedAt: timestamppb.New(st.ExitedAt)}, nil
}

func (s *service) Pids(ctx context.Context, req *taskapi.PidsRequest) (*taskapi.PidsResponse, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	procs, err := t.Pids(ctx)
	if err != nil {
		return nil, err
	}
	return &taskapi.PidsResponse{Processes: procs}, nil
}

func (s *service) Pause(ctx context.Context, req *taskapi.PauseRequest) (*emptypb.Empty, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	if err := t.Pause(ctx); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Resume(ctx context.Context, req *taskapi.ResumeRequest) (*emptypb.Empty, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	if err := t.Resume(ctx); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Checkpoint(ctx context.Context, req *taskapi.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return nil, fmt.Errorf("checkpoint task %s: Windows containers cannot be checkpointed (HCS has no checkpoint/restore for process-isolated containers): %w", req.ID, errdefs.ErrNotImplemented)
}

func (s *service) Kill(ctx context.Context, req *taskapi.KillRequest) (*emptypb.Empty, error) {
	t, err := s.get(req.ID)
	if err != nil {
		return nil, err
	}
	if err := t.Kill(ctx, req.ExecID, req.Signal, req.All); err != nil {
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
	if err := t.Exec(req.ExecID, spec, stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal}); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func decodeProcessSpec(a *anypb.Any) (*specs.Process, error) {
	if a == nil {
		return nil, fmt.Errorf("spec: missing: %w", errdefs.ErrInvalidArgument)
	}
	// An OCI process travels as JSON (typeurl marshals non-protobuf types so).
	if err := oci.CheckUTF16(a.GetValue()); err != nil {
		return nil, fmt.Errorf("exec spec: %w", err)
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
	if err := p.Resize(ctx, req.Width, req.Height); err != nil {
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
		if err := p.CloseStdin(); err != nil {
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
	if err := t.Update(ctx, res); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *service) Wait(ctx context.Context, req *taskapi.WaitRequest) (*taskapi.WaitResponse, error) {
	_, p, err := s.getProcess(req.ID, req.ExecID)
	if err != nil {
		return nil, err
	}
	st, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	return &taskapi.WaitResponse{ExitStatus: st.ExitStatus, ExitedAt: timestamppb.New(st.ExitedAt)}, nil
}

func (s *service) Stats(ctx context.Context, req *taskapi.StatsRequest) (*taskapi.StatsResponse, error) {
	t, err := s.get(req.ID)
	if sb, serr := s.getSandbox(req.ID); err != nil && serr == nil {
		// containerd's Windows CRI reads a pod's own statistics as task metrics of the sandbox
		// id (internal/cri/server/sandbox_stats_windows.go listWindowsMetricsForSandbox); for a
		// sandbox-API pod that reaches this shim, which has no task of that id.
		st, err := sb.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		a, err := typeurl.MarshalAnyToProto(st)
		if err != nil {
			return nil, err
		}
		return &taskapi.StatsResponse{Stats: a}, nil
	}
	if err != nil {
		return nil, err
	}
	// Each kind reports what it is: a container its compute system, a Hyper-V pod's sandbox
	// its utility VM only (hcsshim's task_wcow_podsandbox.go Stats).
	st, err := t.Stats(ctx)
	if err != nil {
		return nil, err
	}
	a, err := typeurl.MarshalAnyToProto(st)
	if err != nil {
		return nil, err
	}
	return &taskapi.StatsResponse{Stats: a}, nil
}

func (s *service) Connect(ctx context.Context, req *taskapi.ConnectRequest) (*taskapi.ConnectResponse, error) {
	resp := &taskapi.ConnectResponse{ShimPid: uint32(os.Getpid()), Version: Version}
	if t, err := s.get(req.ID); err == nil {
		if p, err := t.Process(""); err == nil {
			resp.TaskPid = p.Status().Pid
		}
	}
	return resp, nil
}

func (s *service) Shutdown(ctx context.Context, req *taskapi.ShutdownRequest) (*emptypb.Empty, error) {
	s.exitIfIdle(ctx)
	return &emptypb.Empty{}, nil
}

// exitIfIdle ends the shim unless it still serves something. One shim serves a pod: it stays
// while any task of the pod is left, or the pod's sandbox (until ShutdownSandbox).
//
// It is called from inside the RPC (ctx) that left the shim idle, and the shim must not end
// before that RPC's reply is sent: containerd ignores a lost task Shutdown reply, but fails
// ShutdownSandbox on "ttrpc: closed" (v2.4.2 plugins/sandbox/controller.go Shutdown). So the
// shutdown starts once ctx is done: ttrpc cancels a request's context only after its reply is
// queued to the connection (ttrpc v1.2.10 services.go handle: the deferred cancel runs after
// respond), and a short wait then lets the connection write it. hcsshim's
// containerd-shim-lcow-v2 ends the same way (service_sandbox_internal.go
// shutdownSandboxInternal: ctx.Done, 20 ms). ttrpc's Server.Shutdown, which would wait for the
// write, cannot be used: it makes Serve return ErrServerClosed, which pkg/shim logs as fatal
// and exits on at once (v2.4.2 pkg/shim/shim.go serve), cutting the queued events short.
func (s *service) exitIfIdle(ctx context.Context) {
	if s.pod.Len() > 0 || s.shutdown == nil {
		return
	}
	go func() {
		<-ctx.Done()
		time.Sleep(replyWriteWait)
		// A task may have come meanwhile; then the shim serves it.
		if s.pod.Len() == 0 {
			s.shutdown.Shutdown()
		}
	}()
}

// replyWriteWait is how long the shim lets ttrpc write an RPC's queued reply before it ends.
const replyWriteWait = 20 * time.Millisecond
