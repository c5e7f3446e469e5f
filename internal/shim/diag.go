package shim

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/containerd/ttrpc"

	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/protocols/diag"
)

// maxStacksSize bounds the goroutine dump DiagStacks returns (ttrpc's message limit is 4 MiB;
// a dump larger than this is cut, and says so).
const maxStacksSize = 3 << 20

// noUtilityVM is why the utility-VM calls of the diag service are not implemented.
const noUtilityVM = "this shim runs process-isolated containers only: there is no utility VM (Hyper-V isolation is not implemented)"

// diagService serves containerd.runhcs.v1.diag.ShimDiag (protocols/diag) for the tasks of one
// shim, beside its task service and on the same ttrpc server, so the shim's errdefs interceptor
// (run.go) gives its errors their gRPC codes too. It only reads the service's state: it takes
// the service's and tasks' locks briefly and never makes an HCS call.
type diagService struct{ s *service }

var _ diag.ShimDiagService = diagService{}

// registerDiag adds the diag service to the shim's ttrpc server.
func registerDiag(server *ttrpc.Server, s *service) {
	diag.RegisterShimDiagService(server, diagService{s})
}

// DiagExecInHost would run a process in the pod's utility VM. For a process-isolated pod the
// host is the machine itself, and running arbitrary commands there through the shim's socket is
// not a diagnostic this shim offers.
func (diagService) DiagExecInHost(_ context.Context, req *diag.ExecProcessRequest) (*diag.ExecProcessResponse, error) {
	return nil, fmt.Errorf("exec %q in host: %s: %w", req.GetArgs(), noUtilityVM, errdefs.ErrNotImplemented)
}

// DiagShare would share a host folder into the utility VM.
func (diagService) DiagShare(_ context.Context, req *diag.ShareRequest) (*diag.ShareResponse, error) {
	return nil, fmt.Errorf("share %q into the utility VM at %q: %s: %w", req.GetHostPath(), req.GetUvmPath(), noUtilityVM, errdefs.ErrNotImplemented)
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
	d.s.mu.Lock()
	tasks := make([]*task.Task, 0, len(d.s.tasks))
	for _, t := range d.s.tasks {
		tasks = append(tasks, t)
	}
	d.s.mu.Unlock()
	slices.SortFunc(tasks, func(a, b *task.Task) int { return cmp.Compare(a.ID(), b.ID()) })

	resp := &diag.TasksResponse{Tasks: make([]*diag.Task, 0, len(tasks))}
	for _, t := range tasks {
		dt := &diag.Task{Id: t.ID()}
		if req.GetExecs() {
			dt.Execs = append(dt.Execs, &diag.Exec{Id: t.ID(), State: t.Init().Status().State})
			for _, e := range t.Execs() { // by exec id
				dt.Execs = append(dt.Execs, &diag.Exec{Id: e.ExecID(), State: e.Status().State})
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
