package compute

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/hns"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// TestHostPerformance asks for the emulated host's figures over TCP, as the stand-in pdh.dll
// does: its processors and memory are the daemon's, a process started in its network namespace
// counts (its processor time grows while it spins, its private memory is in the working set),
// a network's bridge is one of its adapters and loopback is not, and an unknown argument is
// refused.
func TestHostPerformance(t *testing.T) {
	d := startDaemon(t)
	c := dialTCP(t, d.tcpAddr)
	sample := func() wire.HostPerformance {
		t.Helper()
		f := c.call(wire.MethodGetHostPerformance, struct{}{})
		if f.HResult != 0 {
			t.Fatalf("GetHostPerformance: %#x: %s", uint32(f.HResult), f.Result)
		}
		var p wire.HostPerformance
		if err := f.DecodeReply(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := sample()
	if before.Processors != d.engine.hostCPUs || before.MemoryTotalBytes != d.engine.vmHost.memMB<<20 || before.MemoryTotalBytes == 0 {
		t.Errorf("processors %d, memory %d: want the daemon's %d and %d MB", before.Processors, before.MemoryTotalBytes, d.engine.hostCPUs, d.engine.vmHost.memMB)
	}
	for _, a := range before.Adapters {
		if a.Name == "lo" {
			t.Errorf("loopback is listed as an adapter: %+v", before.Adapters)
		}
	}

	// A spinning process in the host's namespace: the fork happens on the thread in it.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := hns.InHostNetns(d.engine.cfg.Root, cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := d.engine.hns.CreateNetwork(context.Background(), "", networkDoc("perf-net", "10.252.0.0/24", "10.252.0.1")); err != nil {
		t.Fatal(err)
	}
	// Processor time is not a timing assertion: it is waited for, however slow the machine.
	var after wire.HostPerformance
	for {
		after = sample()
		if after.ProcessorBusyNs >= before.ProcessorBusyNs+uint64(200*time.Millisecond) {
			break
		}
		if t.Failed() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, private, _, _ := procFigures(cmd.Process.Pid)
	if private == 0 || after.WorkingSetPrivateBytes < private || after.CommittedBytes < after.WorkingSetPrivateBytes {
		t.Errorf("working set %d, committed %d: want at least the spinning process's %d, committed ≥ working set", after.WorkingSetPrivateBytes, after.CommittedBytes, private)
	}
	if after.TimestampNs <= before.TimestampNs {
		t.Errorf("timestamps %d then %d: want them to grow", before.TimestampNs, after.TimestampNs)
	}
	var bridge bool
	for _, a := range after.Adapters {
		bridge = bridge || strings.HasPrefix(a.Name, "hns")
	}
	if !bridge {
		t.Errorf("adapters %+v: want the network's bridge (hns…)", after.Adapters)
	}

	f := c.call(wire.MethodGetHostPerformance, map[string]any{"counter": "x"})
	if f.HResult == 0 {
		t.Errorf("GetHostPerformance with an unknown argument succeeded")
	}
}

// TestBusyLedger: the host's processor time is the live processes' time plus that of the
// processes gone since they were seen, so it never goes back when a process exits (Windows'
// % Processor Time comes from idle time, which no exit changes), a reused pid is another
// process, and a process's own figure that goes back is kept at its highest.
func TestBusyLedger(t *testing.T) {
	var l busyLedger
	a, b, b2 := procID{10, 100}, procID{11, 101}, procID{11, 900}
	for i, step := range []struct {
		live map[procID]uint64
		want uint64
	}{
		{map[procID]uint64{a: 5, b: 7}, 12},
		{map[procID]uint64{a: 9, b: 8}, 17},
		{map[procID]uint64{a: 10}, 18},        // b exited: its 8 stay
		{map[procID]uint64{a: 10, b2: 3}, 21}, // pid 11 again, another process
		{map[procID]uint64{a: 4, b2: 3}, 21},  // a's figure went back: kept at 10
		{map[procID]uint64{}, 21},             // everything gone
		{map[procID]uint64{procID{12, 1}: 1}, 22},
	} {
		if got := l.total(step.live); got != step.want {
			t.Errorf("step %d: total %d, want %d", i, got, step.want)
		}
	}
	if first, again := hostBusyLedger("/a"), hostBusyLedger("/a"); first != again || first == hostBusyLedger("/b") {
		t.Error("want one ledger per emulated host's root")
	}
}
