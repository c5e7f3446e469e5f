package shim

import (
	"context"
	"errors"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// hcsAPI binds hcsHost to an internal/hcs Client.
type hcsAPI struct{ c *hcs.Client }

func newHCSHost(c *hcs.Client) hcsHost { return hcsAPI{c} }

func (h hcsAPI) CreateComputeSystem(ctx context.Context, id string, document any) (computeSystem, error) {
	s, err := h.c.CreateComputeSystem(ctx, id, document)
	if err != nil {
		return nil, err
	}
	return hcsSystem{s}, nil
}

func (h hcsAPI) OpenComputeSystem(ctx context.Context, id string) (computeSystem, error) {
	s, err := h.c.OpenComputeSystem(ctx, id)
	if err != nil {
		return nil, err
	}
	return hcsSystem{s}, nil
}

func (h hcsAPI) HostOSVersion(ctx context.Context) (string, error) { return h.c.HostOSVersion(ctx) }

func (hcsAPI) IsGone(err error) bool {
	return errors.Is(err, hcs.ErrNotFound) || errors.Is(err, hcs.ErrAlreadyStopped) ||
		errors.Is(err, hcs.ErrProcessAlreadyStopped)
}

// hcsSystem adapts *hcs.System, whose CreateProcess returns the concrete *hcs.Process.
type hcsSystem struct{ *hcs.System }

func (s hcsSystem) CreateProcess(ctx context.Context, p *schema2.ProcessParameters) (hcsProcess, error) {
	proc, err := s.System.CreateProcess(ctx, p)
	if err != nil {
		return nil, err
	}
	return proc, nil
}
