//go:build unix

package client

import (
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// VM sets the faults of utility VM id ("*": every VM): its boot waits bootDelay, and its guest
// connection fails with guestHR when that is not 0. Zero values clear them.
func (f *Fault) VM(id string, bootDelay time.Duration, guestHR computecore.HRESULT) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultVM, wire.FaultVMArgs{System: id, BootDelayMs: bootDelay.Milliseconds(), GuestHResult: guestHR})
}
