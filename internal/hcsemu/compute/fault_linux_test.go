package compute

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// TestFaultInjector drives the injector alone: what each fault does to a call passing the
// dispatcher's before, and what list reports.
func TestFaultInjector(t *testing.T) {
	ctx := context.Background()
	// The table of an engine's server, as NewEngine gives its injector: wire method names are ops.
	fs := faults{served: (&Engine{}).methods()}

	if err := fs.setStall("no-such-op", 0); err == nil || !strings.Contains(err.Error(), `"no-such-op"`) {
		t.Errorf("stall of an unknown op: %v, want an error naming it", err)
	}
	if err := fs.setFail("start", computecore.HRESULT(0), 1); !errors.Is(err, computecore.E_INVALIDARG) {
		t.Errorf("fail with HRESULT 0: %v, want E_INVALIDARG", err)
	}
	if err := fs.release("start"); err == nil || !strings.Contains(err.Error(), "no stall") {
		t.Errorf("release of no stall: %v", err)
	}

	// A stall holds the call until released; a cancelled call returns at once naming its method.
	if err := fs.setStall("create", 0); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := fs.before(cctx, wire.MethodCreateComputeSystem)
	cancel()
	if !errors.Is(err, computecore.E_CANCELLED) || !strings.Contains(err.Error(), wire.MethodCreateComputeSystem) {
		t.Errorf("cancelled stalled call: %v, want E_CANCELLED naming the method", err)
	}
	if err := fs.before(ctx, wire.MethodStartComputeSystem); err != nil {
		t.Errorf("a call of another op: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- fs.before(ctx, wire.MethodCreateComputeSystem) }()
	waitFor(t, "the call to stall", func() bool {
		l := fs.list()
		return len(l.Stalls) == 1 && l.Stalls[0].Waiting == 1
	})
	select {
	case err := <-done:
		t.Fatalf("stalled call returned before release: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := fs.release(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("released call: %v", err)
	}

	// A timed stall releases by itself.
	if err := fs.setStall("start", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := fs.before(ctx, wire.MethodStartComputeSystem); err != nil || time.Since(start) < 100*time.Millisecond {
		t.Errorf("timed stall: %v after %v, want nil after 100ms", err, time.Since(start))
	}

	// fail --count 2 fails exactly two calls, then goes.
	if err := fs.setFail("start", computecore.HCS_E_CONNECTION_TIMEOUT, 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := fs.before(ctx, wire.MethodStartComputeSystem); !errors.Is(err, computecore.HCS_E_CONNECTION_TIMEOUT) {
			t.Errorf("failed call %d: %v", i, err)
		}
	}
	if err := fs.before(ctx, wire.MethodStartComputeSystem); err != nil {
		t.Errorf("call after the count ran out: %v", err)
	}
	// Fault methods are never faulted; wire method names work as ops.
	if err := fs.setFail(wire.MethodHcnCreateEndpoint, computecore.E_FAIL, 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.before(ctx, wire.MethodHcnCreateEndpoint); !errors.Is(err, computecore.E_FAIL) {
		t.Errorf("HNS call with a failure set: %v", err)
	}
	if err := fs.setDelay(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := fs.before(ctx, wire.MethodFaultList); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Errorf("fault method under a delay: %v after %v", err, time.Since(start))
	}
	start = time.Now()
	if err := fs.before(ctx, wire.MethodGetServiceProperties); err != nil || time.Since(start) < 200*time.Millisecond {
		t.Errorf("delayed call: %v after %v, want nil after 200ms", err, time.Since(start))
	}

	l := fs.list()
	if len(l.Fails) != 1 || l.Fails[0].Method != wire.MethodHcnCreateEndpoint || l.DelayMs != 200 || len(l.Stalls) != 0 {
		t.Errorf("list = %+v", l)
	}
	fs.clear()
	if l := fs.list(); len(l.Fails)+len(l.Stalls) != 0 || l.DelayMs != 0 {
		t.Errorf("list after clear = %+v", l)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dialFault(t *testing.T, d *testDaemon) *client.Fault {
	t.Helper()
	f, err := client.DialFault(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestDaemonFaultStall: a stalled create makes internal/hcs's call time out naming the operation
// and the system, creates nothing, and after release a create succeeds.
func TestDaemonFaultStall(t *testing.T) {
	d := startDaemon(t)
	f := dialFault(t, d)
	c := hcs.NewClient(dial(t, d))
	vol := newVolume(t)

	if _, err := f.Stall("create", 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	start := time.Now()
	_, err := c.CreateComputeSystem(ctx, "stalled", containerConfig(vol, ""))
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "CreateComputeSystem") || !strings.Contains(err.Error(), `"stalled"`) {
		t.Fatalf("create under a stall: %v, want a timeout naming CreateComputeSystem and the system", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the stalled create took %v to fail, want about 1s", el)
	}
	// The cancelled call leaves the stall with nothing waiting.
	waitFor(t, "the cancelled create to leave the stall", func() bool {
		l, err := f.List()
		return err == nil && len(l.Stalls) == 1 && l.Stalls[0].Waiting == 0
	})
	l, err := f.Release("create")
	if err != nil || len(l.Stalls) != 0 {
		t.Fatalf("release: %+v, %v", l, err)
	}
	if n := d.engine.systemCount(); n != 0 {
		t.Errorf("%d systems after a stalled create was cancelled, want 0", n)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.CreateComputeSystem(ctx, "stalled", containerConfig(vol, ""))
	if err != nil {
		t.Fatalf("create after release: %v", err)
	}
	if err := s.Terminate(ctx); err != nil {
		t.Error(err)
	}
	s.Close()
	if l, err := f.List(); err != nil || len(l.Stalls)+len(l.Fails) != 0 {
		t.Errorf("faults left: %+v, %v", l, err)
	}

	// A stall released while a call waits lets that call run normally.
	if _, err := f.Stall("properties", 0); err != nil {
		t.Fatal(err)
	}
	s2, err := c.CreateComputeSystem(ctx, "released", containerConfig(newVolume(t), ""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s2.Terminate(ctx); s2.Close() }()
	done := make(chan error, 1)
	go func() { _, err := s2.Properties(ctx); done <- err }()
	waitFor(t, "properties to stall", func() bool {
		l, err := f.List()
		return err == nil && len(l.Stalls) == 1 && l.Stalls[0].Waiting == 1
	})
	if _, err := f.Release(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("properties after release: %v", err)
	}
}

// TestDaemonFaultFail: `fail start --hresult 0x80370109 --count 1` fails exactly one start.
func TestDaemonFaultFail(t *testing.T) {
	d := startDaemon(t)
	f := dialFault(t, d)
	api := dial(t, d)
	cs, _ := createSystem(t, api, "failing", "", false)
	if _, err := f.Fail("start", 0x80370109, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, api, func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") }); !errors.Is(err, computecore.HCS_E_CONNECTION_TIMEOUT) {
		t.Fatalf("first start: %v, want HRESULT 0x80370109", err)
	}
	if l, err := f.List(); err != nil || len(l.Fails) != 0 {
		t.Errorf("failure left after its count: %+v, %v", l, err)
	}
	mustRun(t, api, "second start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
}

// TestDaemonFaultCrash: crash ends a running system with UnexpectedExit and its process exits.
func TestDaemonFaultCrash(t *testing.T) {
	d := startDaemon(t)
	f := dialFault(t, d)
	api := dial(t, d)
	cs, _ := createSystem(t, api, "crashing", "", true)
	p := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	if _, err := f.Crash("nonexistent"); !errors.Is(err, computecore.HCS_E_SYSTEM_NOT_FOUND) {
		t.Errorf("crash of an unknown system: %v", err)
	}
	if _, err := f.Crash("crashing"); err != nil {
		t.Fatal(err)
	}
	doc, err := api.WaitForComputeSystemExit(cs, opTimeout)
	if err != nil {
		t.Fatalf("wait for the crashed system: %v", err)
	}
	var st schema2.SystemExitStatus
	if err := json.Unmarshal([]byte(doc), &st); err != nil || st.ExitType != schema2.NotificationUnexpectedExit {
		t.Errorf("exit of the crashed system: %s (%v), want UnexpectedExit", doc, err)
	}
	p.exitCode(t) // fails the test if the process does not exit
	if _, err := f.Crash("crashing"); err == nil {
		t.Error("crash of a stopped system succeeded")
	}
}

// TestDaemonFaultDisconnect: disconnect drops every other client, whose calls then fail with
// HCS_E_SERVICE_DISCONNECT; the fault connection stays.
func TestDaemonFaultDisconnect(t *testing.T) {
	d := startDaemon(t)
	f := dialFault(t, d)
	api := dial(t, d)
	if _, err := api.GetServiceProperties(""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Disconnect(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client to be disconnected", func() bool {
		_, err := api.GetServiceProperties("")
		return errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT)
	})
	if _, err := f.List(); err != nil {
		t.Errorf("the fault connection after disconnect: %v", err)
	}
	// New clients are served.
	if _, err := dial(t, d).GetServiceProperties(""); err != nil {
		t.Errorf("a new client after disconnect: %v", err)
	}
}

// TestDaemonFaultDelay: delay slows every call, and 0 ends it.
func TestDaemonFaultDelay(t *testing.T) {
	d := startDaemon(t)
	f := dialFault(t, d)
	api := dial(t, d)
	if _, err := f.Delay(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := api.GetServiceProperties(""); err != nil || time.Since(start) < 300*time.Millisecond {
		t.Errorf("delayed call: %v after %v, want success after 300ms", err, time.Since(start))
	}
	l, err := f.Delay(0)
	if err != nil || l.DelayMs != 0 {
		t.Fatalf("delay 0: %+v, %v", l, err)
	}
	start = time.Now()
	if _, err := api.GetServiceProperties(""); err != nil || time.Since(start) > 200*time.Millisecond {
		t.Errorf("call after the delay ended: %v after %v", err, time.Since(start))
	}
}

// TestDaemonFaultTCPRefused: the TCP transport (the Wine stand-ins') refuses every fault method,
// and nothing is set.
func TestDaemonFaultTCPRefused(t *testing.T) {
	d := startDaemon(t)
	c := dialTCP(t, d.tcpAddr)
	for _, m := range []string{wire.MethodFaultList, wire.MethodFaultClear, wire.MethodFaultDisconnect} {
		if fr := c.call(m, wire.FaultArgs{}); fr.HResult != computecore.E_ACCESSDENIED || !strings.Contains(fr.Result, "unix socket only") {
			t.Errorf("%s over TCP: hresult %#x, result %s; want E_ACCESSDENIED", m, uint32(fr.HResult), fr.Result)
		}
	}
	if fr := c.call(wire.MethodFaultStall, wire.FaultStallArgs{Op: "create"}); fr.HResult != computecore.E_ACCESSDENIED {
		t.Errorf("stall over TCP: hresult %#x", uint32(fr.HResult))
	}
	if l := d.engine.faults.list(); len(l.Stalls) != 0 {
		t.Errorf("a stall refused over TCP is active: %+v", l)
	}
	// The connection still serves the methods it may call.
	if fr := c.call(wire.MethodGetServiceProperties, wire.QueryArgs{}); fr.HResult != 0 {
		t.Errorf("service properties over TCP after a refusal: %#x", uint32(fr.HResult))
	}
}
