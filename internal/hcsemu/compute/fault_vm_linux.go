package compute

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// vmFaults are the faults of utility VMs (wire.MethodFaultVM): a slow boot and a guest
// connection that fails, per VM id or for every VM ("*"). Crashing a VM is Crash
// (fault_linux.go), which ends everything inside it.
type vmFaults struct {
	mu    sync.Mutex
	boots map[string]time.Duration
	guest map[string]computecore.HRESULT
}

func (f *vmFaults) set(id string, boot time.Duration, guest computecore.HRESULT) error {
	if id == "" {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: vm: no VM id (or \"*\" for every VM)")
	}
	if boot < 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: vm %s: negative boot delay %v", id, boot)
	}
	if guest != 0 && int32(guest) >= 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "fault: vm %s: HRESULT %#x is not a failure", id, uint32(guest))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.boots == nil {
		f.boots, f.guest = map[string]time.Duration{}, map[string]computecore.HRESULT{}
	}
	delete(f.boots, id)
	delete(f.guest, id)
	if boot > 0 {
		f.boots[id] = boot
	}
	if guest != 0 {
		f.guest[id] = guest
	}
	return nil
}

// clearAll ends every VM fault.
func (f *vmFaults) clearAll() {
	f.mu.Lock()
	f.boots, f.guest = nil, nil
	f.mu.Unlock()
}

// list reports the VMs' faults, by id.
func (f *vmFaults) list() []wire.FaultVMArgs {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := map[string]bool{}
	for id := range f.boots {
		ids[id] = true
	}
	for id := range f.guest {
		ids[id] = true
	}
	var out []wire.FaultVMArgs
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		out = append(out, wire.FaultVMArgs{System: id, BootDelayMs: f.boots[id].Milliseconds(), GuestHResult: f.guest[id]})
	}
	return out
}

func (f *vmFaults) bootDelay(id string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.boots[id]; ok {
		return d
	}
	return f.boots["*"]
}

// guestFailure is the HRESULT the guest connection of VM id fails with (HCS_E_CONNECTION_TIMEOUT
// is what HCS reports when the guest never connects), or 0.
func (f *vmFaults) guestFailure(id string) computecore.HRESULT {
	f.mu.Lock()
	defer f.mu.Unlock()
	if hr, ok := f.guest[id]; ok {
		return hr
	}
	return f.guest["*"]
}
