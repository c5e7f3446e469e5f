package uvm

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// The small interfaces this package needs, defined where they are used (hcsshim's
// controllers' types.go). The shim binds them to internal/hcs; the tests to fakes.

// System is what a utility VM needs of its compute system (an *hcs.System).
type System interface {
	ID() string
	Start(ctx context.Context) error
	Terminate(ctx context.Context) error
	Modify(ctx context.Context, req *schema2.ModifySettingRequest) error
	Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error)
	// Exited is closed when the VM stopped, by Terminate or by itself.
	Exited() <-chan struct{}
	Close() error
}

// Host creates compute systems (an *hcs.Client, through the shim's adapter).
type Host interface {
	CreateComputeSystem(ctx context.Context, id string, document any) (System, error)
}
