package shim

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/containerd/errdefs"
	"github.com/containerd/ttrpc"

	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/protocols/diag"
)

// maxStacksSize bounds the goroutine dump DiagStacks returns (ttrpc's message limit is 4 MiB;
// a dump larger than this is cut, and says so).
const maxStacksSize = 3 << 20

// noUtilityVM is why the utility-VM calls of the diag service are not implemented for a shim
// that serves a process-isolated pod.
const noUtilityVM = "this shim serves no Hyper-V pod: there is no utility VM"

// diagService serves containerd.runhcs.v1.diag.ShimDiag (protocols/diag) for the tasks of one
// shim, beside its task service and on the same ttrpc server, so the shim's errdefs interceptor
// (run.go) gives its errors their gRPC codes too. It takes the service's and tasks' locks
// briefly; its only HCS calls are those of exec and share in a Hyper-V pod's utility VM, made
// through the sandbox task without a lock.
type diagService struct{ s *service }

var _ diag.ShimDiagService = diagService{}

// registerDiag adds the diag service to the shim's ttrpc server.
func registerDiag(server *ttrpc.Server, s *service) {
	diag.RegisterShimDiagService(server, diagService{s})
}

// DiagExecInHost runs a process in the pod's utility VM, in no container (hcsshim's
// ExecInUvm), and returns its exit code once it ended. A terminal has one output stream, so
// asking for a separate stderr with it is refused (as hcsshim does). For a process-isolated
// pod the host is the machine itself, and running arbitrary commands there through the shim's
// socket is not a diagnostic this shim offers.
func (d diagService) DiagExecInHost(ctx context.Context, req *diag.ExecProcessRequest) (*diag.ExecProcessResponse, error) {
	sandbox := d.s.pod.VMSandbox()
	if sandbox == nil {
		return nil, fmt.Errorf("exec %q in host: %s: %w", req.GetArgs(), noUtilityVM, errdefs.ErrNotImplemented)
	}
	if req.GetTerminal() && req.GetStderr() != "" {
		return nil, fmt.Errorf("exec %q in the utility VM: a terminal has no separate stderr: %w", req.GetArgs(), errdefs.ErrFailedPrecondition)
	}
	code, err := sandbox.ExecInVM(ctx, req.GetArgs(), req.GetWorkdir(), stdio.Config{
		Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr(), Terminal: req.GetTerminal(),
	})
	if err != nil {
		return nil, err
	}
	return &diag.ExecProcessResponse{ExitCode: int32(code)}, nil
}

// DiagShare shares a host folder into the pod's utility VM (hcsshim's uvm.Share).
func (d diagService) DiagShare(ctx context.Context, req *diag.ShareRequest) (*diag.ShareResponse, error) {
	sandbox := d.s.pod.VMSandbox()
	if sandbox == nil {
		return nil, fmt.Errorf("share %q into the utility VM at %q: %s: %w", req.GetHostPath(), req.GetUvmPath(), noUtilityVM, errdefs.ErrNotImplemented)
	}
	if err := sandbox.ShareInVM(ctx, req.GetHostPath(), req.GetUvmPath(), req.GetReadOnly()); err != nil {
		return nil, err
	}
	return &diag.ShareResponse{}, nil
}

// DiagStacks returns every goroutine's stack. GuestStacks stays empty: there is no guest.
func (diagService) DiagStacks(context.Context, *diag.StacksRequest) (*diag.StacksResponse, error) {
	return &diag.StacksResponse{Stacks: goroutineStacks(maxStacksSize)}, nil
}

// goroutineStacks is runtime.Stack of all goroutines, with a buffer grown until the dump fits
// (runtime.Stack cuts it to the buffer silently) or reaches limit.
func goroutineStacks(limit int) string {
	for size := 64 << 10; ; size *= 2 {
		if size > limit {
			size = limit
		}
		buf := make([]byte, size)
		n := runtime.Stack(buf, true)
		if n < size {
			return string(buf[:n])
		}
		if size == limit {
			return string(buf[:n]) + fmt.Sprintf("\n... goroutine dump cut at %d bytes\n", limit)
		}
	}
}

// DiagTasks lists the shim's tasks by id and, when asked, their processes: the init process
// first (under the task's id, as hcsshim lists it), then the execs by id, each with its state
// (created, starting, running, paused, stopped, deleted; state.go).
func (d diagService) DiagTasks(_ context.Context, req *diag.TasksRequest) (*diag.TasksResponse, error) {
	tasks := d.s.pod.Tasks() // by id

	resp := &diag.TasksResponse{Tasks: make([]*diag.Task, 0, len(tasks))}
	for _, t := range tasks {
		dt := &diag.Task{Id: t.ID()}
		if req.GetExecs() {
			if init, err := t.Process(""); err == nil {
				dt.Execs = append(dt.Execs, &diag.Exec{Id: t.ID(), State: init.Status().State})
			}
			for _, e := range t.Execs() { // by exec id
				dt.Execs = append(dt.Execs, &diag.Exec{Id: e.ID(), State: e.Status().State})
			}
		}
		resp.Tasks = append(resp.Tasks, dt)
	}
	return resp, nil
}

// DiagPid returns the shim's own process id.
func (diagService) DiagPid(context.Context, *diag.PidRequest) (*diag.PidResponse, error) {
	return &diag.PidResponse{Pid: int32(os.Getpid())}, nil
}
