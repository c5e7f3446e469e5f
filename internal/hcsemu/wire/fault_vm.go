package wire

import "github.com/openhcs/runhcs/internal/computecore"

// MethodFaultVM sets the faults of a utility VM (FaultVMArgs); like the other fault methods it
// is served on the unix socket only and answers with a FaultListReply.
const MethodFaultVM = "FaultVM"

// FaultVMArgs are the args of MethodFaultVM for System (a VM id, or "*" for every VM): starts
// wait BootDelayMs before the VM boots, and with GuestHResult set, the guest connection of a
// VM with VirtualMachine.GuestConnection fails with it (HCS_E_CONNECTION_TIMEOUT is what HCS
// reports for a guest that never connects). Zero values clear the VM's faults.
type FaultVMArgs struct {
	System       string              `json:"system"`
	BootDelayMs  int64               `json:"bootDelayMs,omitempty"`
	GuestHResult computecore.HRESULT `json:"guestHresult,omitempty"`
}
