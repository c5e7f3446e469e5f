package uvm

import (
	"context"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

const hostPipePrefix = `\\.\pipe\`

// AddPipe maps the host named pipe hostPipe (\\.\pipe\X) into the VM, or takes another
// reference to it, and returns the path a hosted container's MappedPipe names as its
// HostPath: the pipe under the VSMB IPC$ share (hcsshim's internal/uvm/pipes.go). The request
// has no settings: Microsoft's HcsModifyComputeSystem table says "Settings should be empty".
func (vm *VM) AddPipe(ctx context.Context, hostPipe string) (string, error) {
	name, ok := strings.CutPrefix(hostPipe, hostPipePrefix)
	if !ok || name == "" {
		return "", fmt.Errorf("pipe %q: want \\\\.\\pipe\\<name>: %w", hostPipe, errdefs.ErrInvalidArgument)
	}
	return vm.pipes.acquire(hostPipe, func() (string, error) {
		if err := vm.add(ctx, &schema2.ModifySettingRequest{
			ResourcePath: fmt.Sprintf(schema2.ResourcePathMappedPipeFormat, hostPipe),
			RequestType:  schema2.RequestTypeAdd,
		}); err != nil {
			return "", fmt.Errorf("map pipe %s into the VM: %w", hostPipe, err)
		}
		return schema2.VSMBGuestPipePath(name), nil
	})
}

// ReleasePipe drops a reference to hostPipe; the last one removes the mapping.
func (vm *VM) ReleasePipe(ctx context.Context, hostPipe string) error {
	_, err := vm.pipes.release(hostPipe, func(string) error {
		return vm.remove(ctx, &schema2.ModifySettingRequest{
			ResourcePath: fmt.Sprintf(schema2.ResourcePathMappedPipeFormat, hostPipe),
			RequestType:  schema2.RequestTypeRemove,
		})
	})
	return err
}
