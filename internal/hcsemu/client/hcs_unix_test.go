//go:build unix

package client

import (
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// fakeDaemon answers a client's requests with handler, on a temporary socket.
type fakeDaemon struct {
	conns chan *wire.Conn
}

func startFake(t *testing.T, handler func(c *wire.Conn, f *wire.Frame)) (*HCS, *fakeDaemon) {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fd := &fakeDaemon{conns: make(chan *wire.Conn, 1)}
	go func() {
		uc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		c := wire.NewConn(uc)
		fd.conns <- c
		for {
			f, _, err := c.Receive()
			if err != nil {
				return
			}
			go handler(c, f)
		}
	}()
	c, err := DialHCS(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, fd
}

func reply(c *wire.Conn, f *wire.Frame, v any) {
	b, _ := json.Marshal(v)
	c.Send(&wire.Frame{ID: f.ID, Reply: b})
}

func waitEvent(t *testing.T, ch <-chan computecore.Event, want computecore.EventType) computecore.Event {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Type != want {
			t.Fatalf("event %v, want %v", ev.Type, want)
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("no %v event", want)
	}
	return computecore.Event{}
}

// An exit the daemon queues before the reply that names the instance (the system stopped
// between registering the handle and answering) must still reach the handle.
func TestEmulatorEventBeforeReply(t *testing.T) {
	ref := wire.SystemRef{ID: "s", Instance: 7}
	c, _ := startFake(t, func(c *wire.Conn, f *wire.Frame) {
		switch f.Method {
		case wire.MethodCreateComputeSystem:
			c.Send(&wire.Frame{Event: &wire.Event{Type: computecore.EventSystemExited, System: ref, Data: `{"Status":0,"ExitType":"GracefulExit"}`}})
			reply(c, f, wire.SystemReply{Instance: 7})
		case wire.MethodCreateProcess:
			c.Send(&wire.Frame{Event: &wire.Event{Type: computecore.EventProcessExited, System: ref, PID: 42, Data: `{"Status":0,"ExitCode":3}`}})
			reply(c, f, wire.ProcessReply{PID: 42})
		default:
			c.Send(&wire.Frame{ID: f.ID})
		}
	})
	op, _ := c.CreateOperation(0, nil)
	cs, err := c.CreateComputeSystem("s", "{}", op, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForOperationResult(op, 5000); err != nil {
		t.Fatal(err)
	}
	if doc, err := c.WaitForComputeSystemExit(cs, 5000); err != nil || doc != `{"Status":0,"ExitType":"GracefulExit"}` {
		t.Errorf("system exit %q, %v", doc, err)
	}
	events := make(chan computecore.Event, 4)
	c.SetComputeSystemCallback(cs, 0, 0, func(ev computecore.Event, _ uintptr) { events <- ev })
	waitEvent(t, events, computecore.EventSystemExited) // delivered to a callback registered late

	op2, _ := c.CreateOperation(0, nil)
	p, err := c.CreateProcess(cs, "{}", op2, 0)
	if err != nil {
		t.Fatal(err)
	}
	pi, _, err := c.WaitForOperationResultAndProcessInfo(op2, 5000)
	if err != nil || pi.ProcessID != 42 {
		t.Fatalf("process info %+v, %v", pi, err)
	}
	if doc, err := c.WaitForProcessExit(p, 5000); err != nil || doc != `{"Status":0,"ExitCode":3}` {
		t.Errorf("process exit %q, %v", doc, err)
	}
}

func TestEmulatorOperations(t *testing.T) {
	release := make(chan struct{})
	c, _ := startFake(t, func(c *wire.Conn, f *wire.Frame) {
		switch f.Method {
		case wire.MethodOpenComputeSystem:
			reply(c, f, wire.SystemReply{Instance: 1})
		case wire.MethodStartComputeSystem:
			<-release
			c.Send(&wire.Frame{ID: f.ID, HResult: computecore.HCS_E_INVALID_STATE, Result: `{"Error":-2143878907,"ErrorMessage":"no"}`})
		case wire.MethodCancel:
			c.Send(&wire.Frame{ID: f.ID})
		default:
			c.Send(&wire.Frame{ID: f.ID})
		}
	})
	cs, err := c.OpenComputeSystem("s", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartComputeSystem(cs, computecore.Operation(999), ""); !errors.Is(err, computecore.E_HANDLE) {
		t.Errorf("unknown operation: %v", err)
	}
	if _, err := c.GetOperationResult(computecore.Operation(999)); !errors.Is(err, computecore.E_HANDLE) {
		t.Errorf("result of an unknown operation: %v", err)
	}
	called := make(chan computecore.Event, 1)
	op, _ := c.CreateOperation(5, func(ev computecore.Event, ctx uintptr) {
		if ctx == 5 {
			called <- ev
		}
	})
	defer c.CloseOperation(op)
	if _, err := c.WaitForOperationResult(op, 10); !errors.Is(err, computecore.HCS_E_OPERATION_NOT_STARTED) {
		t.Errorf("wait on an unused operation: %v", err)
	}
	if err := c.StartComputeSystem(cs, op, ""); err != nil {
		t.Fatal(err)
	}
	if c.GetOperationType(op) != computecore.OperationTypeStart || c.GetComputeSystemFromOperation(op) != cs || c.GetOperationContext(op) != 5 {
		t.Errorf("operation type %v system %v context %v", c.GetOperationType(op), c.GetComputeSystemFromOperation(op), c.GetOperationContext(op))
	}
	if err := c.PauseComputeSystem(cs, op, ""); !errors.Is(err, computecore.HCS_E_OPERATION_ALREADY_STARTED) {
		t.Errorf("reuse of an operation: %v", err)
	}
	if _, err := c.GetOperationResult(op); !errors.Is(err, computecore.HCS_E_OPERATION_PENDING) {
		t.Errorf("result of a pending operation: %v", err)
	}
	if _, err := c.WaitForOperationResult(op, 50); !errors.Is(err, computecore.E_WAIT_TIMEOUT) {
		t.Errorf("wait: %v, want WAIT_TIMEOUT", err)
	}
	close(release)
	doc, err := c.WaitForOperationResult(op, 5000)
	if !errors.Is(err, computecore.HCS_E_INVALID_STATE) || doc != `{"Error":-2143878907,"ErrorMessage":"no"}` {
		t.Errorf("result %q, %v", doc, err)
	}
	waitEvent(t, called, computecore.EventOperationCallback)
}

// When the daemon goes, pending calls fail, handles see their system and process exit, then
// ServiceDisconnect, and later calls fail at once.
func TestEmulatorDisconnect(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	c, fake := startFake(t, func(c *wire.Conn, f *wire.Frame) {
		switch f.Method {
		case wire.MethodOpenComputeSystem:
			reply(c, f, wire.SystemReply{Instance: 1})
		case wire.MethodOpenProcess:
			reply(c, f, wire.ProcessReply{PID: 9})
		default:
			<-block // never answers
		}
	})
	cs, err := c.OpenComputeSystem("s", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.OpenProcess(cs, 9, computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	sysEvents, procEvents := make(chan computecore.Event, 4), make(chan computecore.Event, 4)
	c.SetComputeSystemCallback(cs, 0, 0, func(ev computecore.Event, _ uintptr) { sysEvents <- ev })
	c.SetProcessCallback(p, 0, 0, func(ev computecore.Event, _ uintptr) { procEvents <- ev })
	op, _ := c.CreateOperation(0, nil)
	if err := c.ShutDownComputeSystem(cs, op, ""); err != nil {
		t.Fatal(err)
	}
	(<-fake.conns).Close() // the daemon dies
	if _, err := c.WaitForOperationResult(op, 5000); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("pending call: %v", err)
	}
	waitEvent(t, sysEvents, computecore.EventSystemExited)
	waitEvent(t, sysEvents, computecore.EventServiceDisconnect)
	ev := waitEvent(t, procEvents, computecore.EventProcessExited)
	if ev.EventData == "" {
		t.Error("process exit without data")
	}
	waitEvent(t, procEvents, computecore.EventServiceDisconnect)
	if _, err := c.OpenComputeSystem("s", computecore.GenericAll); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("open after disconnect: %v", err)
	}
	if _, err := c.GetServiceProperties(""); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("service properties after disconnect: %v", err)
	}
	if _, err := c.WaitForComputeSystemExit(cs, 1000); err != nil {
		t.Errorf("wait for exit after disconnect: %v", err)
	}
}
