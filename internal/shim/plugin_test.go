package shim

import (
	"context"
	"fmt"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestErrorCodes(t *testing.T) {
	icpt := taskServices{}.UnaryServerInterceptor()
	tests := []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("task %q: %w", "c1", errdefs.ErrNotFound), codes.NotFound},
		{fmt.Errorf("bad: %w", errdefs.ErrInvalidArgument), codes.InvalidArgument},
		{fmt.Errorf("nope: %w", errdefs.ErrNotImplemented), codes.Unimplemented},
		{fmt.Errorf("state: %w", errdefs.ErrFailedPrecondition), codes.FailedPrecondition},
	}
	for _, tc := range tests {
		_, err := icpt(context.Background(), nil, &ttrpc.UnaryServerInfo{}, func(context.Context, func(any) error) (any, error) {
			return nil, tc.err
		})
		if s, _ := status.FromError(err); s.Code() != tc.code || s.Message() == "" {
			t.Errorf("%v → %v, want %v", tc.err, s.Code(), tc.code)
		}
	}
}
