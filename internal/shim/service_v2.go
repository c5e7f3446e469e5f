package shim

import (
	"context"
	"fmt"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// serviceV2 serves the task service as containerd.task.v2.Task, which containerd 1.7 calls
// (containerd 2.x calls v3: the start action advertises bootstrap version 3 to it, start.go). Its messages are the
// v3 messages under another package name (api/runtime/task/v2/shim.proto and v3/shim.proto
// differ only in their package), so each call is converted through the wire format.
type serviceV2 struct{ s *service }

var _ taskv2.TTRPCTaskService = serviceV2{}

// call converts a v2 request to v3, calls fn and converts the v3 response back.
func call[S2 any, PS2 interface {
	*S2
	proto.Message
}, Q3 any, PQ3 interface {
	*Q3
	proto.Message
}, RS3 proto.Message](ctx context.Context, req proto.Message, fn func(context.Context, PQ3) (RS3, error)) (PS2, error) {
	q := PQ3(new(Q3))
	if err := convertMessage(req, q); err != nil {
		return nil, err
	}
	r, err := fn(ctx, q)
	if err != nil {
		return nil, err
	}
	out := PS2(new(S2))
	if err := convertMessage(r, out); err != nil {
		return nil, err
	}
	return out, nil
}

func convertMessage(from, to proto.Message) error {
	b, err := proto.Marshal(from)
	if err != nil {
		return fmt.Errorf("task v2: marshal %s: %w", from.ProtoReflect().Descriptor().FullName(), err)
	}
	if err := proto.Unmarshal(b, to); err != nil {
		return fmt.Errorf("task v2: unmarshal %s: %w", to.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

func (v serviceV2) State(ctx context.Context, r *taskv2.StateRequest) (*taskv2.StateResponse, error) {
	return call[taskv2.StateResponse](ctx, r, v.s.State)
}

func (v serviceV2) Create(ctx context.Context, r *taskv2.CreateTaskRequest) (*taskv2.CreateTaskResponse, error) {
	return call[taskv2.CreateTaskResponse](ctx, r, v.s.Create)
}

func (v serviceV2) Start(ctx context.Context, r *taskv2.StartRequest) (*taskv2.StartResponse, error) {
	return call[taskv2.StartResponse](ctx, r, v.s.Start)
}

func (v serviceV2) Delete(ctx context.Context, r *taskv2.DeleteRequest) (*taskv2.DeleteResponse, error) {
	return call[taskv2.DeleteResponse](ctx, r, v.s.Delete)
}

func (v serviceV2) Pids(ctx context.Context, r *taskv2.PidsRequest) (*taskv2.PidsResponse, error) {
	return call[taskv2.PidsResponse](ctx, r, v.s.Pids)
}

func (v serviceV2) Pause(ctx context.Context, r *taskv2.PauseRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Pause)
}

func (v serviceV2) Resume(ctx context.Context, r *taskv2.ResumeRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Resume)
}

func (v serviceV2) Checkpoint(ctx context.Context, r *taskv2.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Checkpoint)
}

func (v serviceV2) Kill(ctx context.Context, r *taskv2.KillRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Kill)
}

func (v serviceV2) Exec(ctx context.Context, r *taskv2.ExecProcessRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Exec)
}

func (v serviceV2) ResizePty(ctx context.Context, r *taskv2.ResizePtyRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.ResizePty)
}

func (v serviceV2) CloseIO(ctx context.Context, r *taskv2.CloseIORequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.CloseIO)
}

func (v serviceV2) Update(ctx context.Context, r *taskv2.UpdateTaskRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Update)
}

func (v serviceV2) Wait(ctx context.Context, r *taskv2.WaitRequest) (*taskv2.WaitResponse, error) {
	return call[taskv2.WaitResponse](ctx, r, v.s.Wait)
}

func (v serviceV2) Stats(ctx context.Context, r *taskv2.StatsRequest) (*taskv2.StatsResponse, error) {
	return call[taskv2.StatsResponse](ctx, r, v.s.Stats)
}

func (v serviceV2) Connect(ctx context.Context, r *taskv2.ConnectRequest) (*taskv2.ConnectResponse, error) {
	return call[taskv2.ConnectResponse](ctx, r, v.s.Connect)
}

func (v serviceV2) Shutdown(ctx context.Context, r *taskv2.ShutdownRequest) (*emptypb.Empty, error) {
	return call[emptypb.Empty](ctx, r, v.s.Shutdown)
}
