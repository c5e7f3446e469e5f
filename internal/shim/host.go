package shim

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// hcsHost binds task.Host to an internal/hcs Client.
type hcsHost struct{ c *hcs.Client }

func newHCSHost(c *hcs.Client) task.Host { return hcsHost{c} }

func (h hcsHost) CreateComputeSystem(ctx context.Context, id string, document any) (task.System, error) {
	s, err := h.c.CreateComputeSystem(ctx, id, document)
	if err != nil {
		return nil, err
	}
	return hcsSystem{s}, nil
}

func (h hcsHost) OpenComputeSystem(ctx context.Context, id string) (task.System, error) {
	s, err := h.c.OpenComputeSystem(ctx, id)
	if err != nil {
		return nil, err
	}
	return hcsSystem{s}, nil
}

// AddCredentialGuard and RemoveCredentialGuard make the host a task.CredentialGuards.
func (h hcsHost) AddCredentialGuard(ctx context.Context, id, credSpec, transport string) (*schema2.ContainerCredentialGuardInstance, error) {
	return h.c.AddCredentialGuard(ctx, id, credSpec, transport)
}

func (h hcsHost) RemoveCredentialGuard(ctx context.Context, id string) error {
	return h.c.RemoveCredentialGuard(ctx, id)
}

// HostOSVersion is the host's Windows build (osVersioner, create.go).
func (h hcsHost) HostOSVersion(ctx context.Context) (string, error) {
	return h.c.HostOSVersion(ctx)
}

// hcsSystem adapts *hcs.System, whose CreateProcess returns the concrete *hcs.Process.
type hcsSystem struct{ *hcs.System }

func (s hcsSystem) CreateProcess(ctx context.Context, p *schema2.ProcessParameters) (task.HCSProcess, error) {
	proc, err := s.System.CreateProcess(ctx, p)
	if err != nil {
		return nil, err
	}
	return proc, nil
}

// HostProcessorCount is the host's logical processor count (processorCounter, hyperv.go), from
// the service property ProcessorTopology.
func (h hcsHost) HostProcessorCount(ctx context.Context) (uint32, error) {
	t, err := h.c.ProcessorTopology(ctx)
	if err != nil {
		return 0, err
	}
	return t.LogicalProcessorCount, nil
}
