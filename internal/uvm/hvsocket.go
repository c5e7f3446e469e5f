package uvm

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// HvSocket services: by default nothing inside the VM may connect to a process on the host over
// HvSocket; an entry in the VM's service table allows it for one service GUID. A gMSA container
// in the VM reaches its Container Credential Guard instance that way, so the instance's service is
// added to the VM for the container and removed with it (hcsshim's internal/uvm/hvsocket.go
// UpdateHvSocketService, called by hcsoci/resources_wcow.go; hcsshim leaves the entry until the
// VM goes, runhcs removes it with the container so the VM's table lists only live instances).
// Each instance has its own service GUID, so an entry has one user and is not reference counted.

// AddHvSocketService adds (or updates) the VM's service table entry of serviceID. HCS has no
// Add for the table: Update creates an entry that does not exist (hcsshim's
// UpdateHvSocketService comment, case 1).
func (vm *VM) AddHvSocketService(ctx context.Context, serviceID string, cfg *schema2.HvSocketServiceConfig) error {
	if !schema2.IsGUID(serviceID) {
		return fmt.Errorf("utility VM %s: HvSocket service id %q: not a GUID: %w", vm.id, serviceID, errdefs.ErrInvalidArgument)
	}
	if cfg == nil {
		return fmt.Errorf("utility VM %s: HvSocket service %s: no service config: %w", vm.id, serviceID, errdefs.ErrInvalidArgument)
	}
	return vm.add(ctx, &schema2.ModifySettingRequest{
		ResourcePath: fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, serviceID),
		RequestType:  schema2.RequestTypeUpdate,
		Settings:     cfg,
	})
}

// RemoveHvSocketService removes the entry of serviceID; with the VM gone there is nothing to
// remove (vm.remove).
func (vm *VM) RemoveHvSocketService(ctx context.Context, serviceID string) error {
	return vm.remove(ctx, &schema2.ModifySettingRequest{
		ResourcePath: fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, serviceID),
		RequestType:  schema2.RequestTypeRemove,
	})
}
