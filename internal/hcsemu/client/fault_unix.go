//go:build unix

package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Fault is the hcsemu daemon's fault control (wire/fault.go), for tests and `hcsemu fault`:
// one connection to its unix socket. Each call returns the faults active once it has run.
type Fault struct {
	c *HCS
}

// DialFault connects to the fault control of the daemon at addr (its unix socket).
func DialFault(addr string) (*Fault, error) {
	c, err := DialHCS(addr)
	if err != nil {
		return nil, err
	}
	return &Fault{c: c}, nil
}

// Close drops the connection; the faults stay active.
func (f *Fault) Close() error { return f.c.Close() }

// Stall holds every call of op until Release, or for d when d is not 0.
func (f *Fault) Stall(op string, d time.Duration) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultStall, wire.FaultStallArgs{Op: op, ForMs: d.Milliseconds()})
}

// Release lets the calls stalled on op proceed, or those of every stall when op is "".
func (f *Fault) Release(op string) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultRelease, wire.FaultReleaseArgs{Op: op})
}

// Fail makes the next count calls of op (every call when count is 0) fail with hr.
func (f *Fault) Fail(op string, hr computecore.HRESULT, count int) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultFail, wire.FaultFailArgs{Op: op, HResult: hr, Count: count})
}

// Crash stops the compute system id with an UnexpectedExit; its processes die.
func (f *Fault) Crash(id string) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultCrash, wire.FaultCrashArgs{System: id})
}

// Disconnect drops every other client connection of the daemon.
func (f *Fault) Disconnect() (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultDisconnect, wire.FaultArgs{})
}

// Delay makes every call wait d before it runs; 0 ends the delay.
func (f *Fault) Delay(d time.Duration) (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultDelay, wire.FaultDelayArgs{DelayMs: d.Milliseconds()})
}

// List returns the faults active.
func (f *Fault) List() (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultList, wire.FaultArgs{})
}

// Clear ends every fault; stalled calls proceed.
func (f *Fault) Clear() (wire.FaultListReply, error) {
	return f.call(wire.MethodFaultClear, wire.FaultArgs{})
}

func (f *Fault) call(method string, args any) (wire.FaultListReply, error) {
	var r wire.FaultListReply
	fr, err := f.c.roundTrip(method, args, nil)
	if err != nil {
		if fr != nil {
			var re schema2.ResultError
			if json.Unmarshal([]byte(fr.Result), &re) == nil && re.ErrorMessage != "" {
				return r, fmt.Errorf("hcsemu %s: %s: %w", method, re.ErrorMessage, err)
			}
		}
		return r, fmt.Errorf("hcsemu %s: %w", method, err)
	}
	if err := fr.DecodeReply(&r); err != nil {
		return r, fmt.Errorf("hcsemu %s: %w", method, err)
	}
	return r, nil
}
