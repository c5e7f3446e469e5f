package computecore_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/wintest"
)

// These tests drive the real mkwinsyscall bindings (New, dll) against hack/wine's stand-in
// computecore.dll, which forwards every call to an hcsemu-like daemon over loopback TCP. They
// run only under Wine, where hack/wine/setup.sh installs the stand-in in system32; on Windows
// computecore.dll is Microsoft's and talks to the real HCS.
//
// The daemon here is a small fake that speaks hcsemu's wire protocol, with the TCP stdio
// extension the stand-in expects (hack/wine/README.md): a reply with stdio carries a
// "stdioToken", and each stream arrives on its own connection whose first frame is
// AttachStdio{token, slot}.

// unicode is in every document so that the UTF-16 <-> UTF-8 conversions are checked.
const unicode = "wïndows ☃ 😀"

type fakeDaemon struct {
	l net.Listener

	mu       sync.Mutex
	conn     net.Conn // the stand-in's control connection
	received map[string][]string
	streams  map[string]chan net.Conn // by token+slot
	sendMu   sync.Mutex
}

var (
	daemonOnce sync.Once
	daemon     *fakeDaemon
	daemonErr  error
	standIn    computecore.API
)

// standInAPI starts the fake daemon once per test binary (the stand-in dials
// $HCSEMU_TCP_ADDRESS once per process) and returns the bindings.
func standInAPI(t *testing.T) (computecore.API, *fakeDaemon) {
	t.Helper()
	if !wintest.UnderWine() {
		t.Skip("the stand-in computecore.dll exists only in hack/wine's Wine prefix")
	}
	daemonOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			daemonErr = err
			return
		}
		daemon = &fakeDaemon{l: l, received: map[string][]string{}, streams: map[string]chan net.Conn{}}
		go daemon.serve()
		if err := os.Setenv("HCSEMU_TCP_ADDRESS", l.Addr().String()); err != nil {
			daemonErr = err
			return
		}
		standIn, daemonErr = computecore.New()
	})
	if daemonErr != nil {
		t.Fatalf("stand-in computecore.dll: %v", daemonErr)
	}
	return standIn, daemon
}

func (d *fakeDaemon) serve() {
	for {
		c, err := d.l.Accept()
		if err != nil {
			return
		}
		go d.handle(c)
	}
}

func readFrame(r io.Reader) (*wire.Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var f wire.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("frame %q: %w", b, err)
	}
	return &f, nil
}

func (d *fakeDaemon) send(f any) {
	b, _ := json.Marshal(f)
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	_, _ = d.conn.Write(append(hdr[:], b...))
}

type attachArgs struct {
	Token string `json:"token"`
	Slot  int    `json:"slot"`
}

func (d *fakeDaemon) stream(token string, slot int) chan net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := fmt.Sprintf("%s/%d", token, slot)
	if d.streams[k] == nil {
		d.streams[k] = make(chan net.Conn, 1)
	}
	return d.streams[k]
}

func (d *fakeDaemon) handle(c net.Conn) {
	r := bufio.NewReader(c)
	first := true
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		if first && f.Method == "AttachStdio" {
			var a attachArgs
			if err := json.Unmarshal(f.Args, &a); err != nil {
				_ = c.Close()
				return
			}
			d.stream(a.Token, a.Slot) <- &bufferedConn{Conn: c, r: r}
			return
		}
		if first {
			d.mu.Lock()
			d.conn = c
			d.mu.Unlock()
			first = false
		}
		go d.answer(f)
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// argsOf is what hcsemu decodes each method's args into (internal/hcsemu/server_linux.go).
func argsOf(method string) any {
	switch method {
	case wire.MethodCreateComputeSystem:
		return &wire.CreateSystemArgs{}
	case wire.MethodOpenComputeSystem:
		return &wire.OpenSystemArgs{}
	case wire.MethodEnumerateComputeSystems, wire.MethodGetServiceProperties:
		return &wire.QueryArgs{}
	case wire.MethodCreateProcess:
		return &wire.CreateProcessArgs{}
	case wire.MethodOpenProcess:
		return &wire.ProcessRef{}
	case wire.MethodCloseProcess, wire.MethodTerminateProcess, wire.MethodSignalProcess,
		wire.MethodGetProcessProperties, wire.MethodModifyProcess:
		return &wire.ProcessArgs{}
	case wire.MethodCancel:
		return &wire.CancelArgs{}
	}
	return &wire.SystemArgs{}
}

// answer serves one request as hcsemu would, for the few systems these tests use. Args are
// decoded as strictly as hcsemu decodes them: an unknown field is HCS_E_PROTOCOL_ERROR.
func (d *fakeDaemon) answer(f *wire.Frame) {
	d.mu.Lock()
	d.received[f.Method] = append(d.received[f.Method], string(f.Args))
	d.mu.Unlock()
	resp := map[string]any{"id": f.ID}
	fail := func(hr computecore.HRESULT, doc string) {
		resp["hresult"] = uint32(hr)
		resp["result"] = doc
	}
	if err := f.DecodeArgs(argsOf(f.Method)); err != nil {
		fail(computecore.HCS_E_PROTOCOL_ERROR, err.Error())
		d.send(resp)
		return
	}
	switch f.Method {
	case wire.MethodCreateComputeSystem:
		var a wire.CreateSystemArgs
		_ = json.Unmarshal(f.Args, &a)
		if a.ID == "exists" {
			fail(computecore.HCS_E_SYSTEM_ALREADY_EXISTS, `{"Error":-2143878897,"ErrorMessage":"A compute system with the id exists already `+unicode+`"}`)
			break
		}
		resp["reply"] = wire.SystemReply{Instance: 7}
	case wire.MethodOpenComputeSystem:
		var a wire.OpenSystemArgs
		_ = json.Unmarshal(f.Args, &a)
		if a.ID != "c1" {
			fail(computecore.HCS_E_SYSTEM_NOT_FOUND, "")
			break
		}
		resp["reply"] = wire.SystemReply{Instance: 7}
	case wire.MethodStartComputeSystem, wire.MethodCloseComputeSystem, wire.MethodCloseProcess, wire.MethodCancel:
	case wire.MethodGetComputeSystemProperties:
		resp["result"] = `{"Id":"c1","Name":"` + unicode + `","State":"Running"}`
	case wire.MethodTerminateComputeSystem:
		var a wire.SystemArgs
		_ = json.Unmarshal(f.Args, &a)
		d.send(resp)
		d.send(map[string]any{"event": wire.Event{Type: computecore.EventSystemExited, System: a.System,
			Data: `{"Status":0,"ExitType":"Forced"}`}})
		return
	case wire.MethodGetServiceProperties:
		resp["result"] = `{"Properties":[{"Version":"10.0.20348.1"}]}`
	case wire.MethodOpenProcess:
		var a wire.ProcessRef
		_ = json.Unmarshal(f.Args, &a)
		if a.PID != 42 {
			fail(computecore.HCS_E_PROCESS_INFO_NOT_AVAILABLE, "")
			break
		}
		resp["reply"] = wire.ProcessReply{PID: 42}
	case wire.MethodCreateProcess:
		var a wire.CreateProcessArgs
		_ = json.Unmarshal(f.Args, &a)
		token := fmt.Sprintf("token-%d", f.ID)
		resp["reply"] = map[string]any{"pid": 42, "stdio": []bool{true, true, true}, "stdioToken": token}
		go d.runUpper(token, a.System)
	default:
		fail(computecore.E_NOTIMPL, "")
	}
	d.send(resp)
}

// runUpper is the emulated process: it writes its stdin upper-cased to stdout and "done" to
// stderr, then exits with code 3.
func (d *fakeDaemon) runUpper(token string, sys wire.SystemRef) {
	var conns [3]net.Conn
	for i := range conns {
		select {
		case conns[i] = <-d.stream(token, i):
		case <-time.After(10 * time.Second):
			return
		}
	}
	in, _ := io.ReadAll(conns[0])
	_, _ = conns[1].Write([]byte(strings.ToUpper(string(in))))
	_, _ = conns[2].Write([]byte("done"))
	for _, c := range conns {
		_ = c.Close()
	}
	d.send(map[string]any{"event": wire.Event{Type: computecore.EventProcessExited, System: sys, PID: 42,
		Data: `{"Status":0,"ExitCode":3}`}})
}

func (d *fakeDaemon) lastArgs(method string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.received[method]
	if len(a) == 0 {
		return ""
	}
	return a[len(a)-1]
}

// events collects what a callback receives.
type events chan computecore.Event

func (e events) callback(ev computecore.Event, _ uintptr) { e <- ev }

func (e events) next(t *testing.T, want computecore.EventType) computecore.Event {
	t.Helper()
	select {
	case ev := <-e:
		if ev.Type != want {
			t.Fatalf("event %v, want %v", ev.Type, want)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no %v event within 10s", want)
	}
	return computecore.Event{}
}

// createSystem creates "c1" through the stand-in and waits for it, with a completion callback.
func createSystem(t *testing.T, api computecore.API, id, doc string) (computecore.System, error) {
	t.Helper()
	done := make(events, 1)
	op, err := api.CreateOperation(0xc0ffee, done.callback)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	cs, err := api.CreateComputeSystem(id, doc, op, 0)
	if err != nil {
		return 0, err
	}
	if got := api.GetComputeSystemFromOperation(op); got != cs {
		t.Errorf("GetComputeSystemFromOperation = %#x, want the handle %#x", got, cs)
	}
	result, err := api.WaitForOperationResult(op, 10_000)
	ev := done.next(t, computecore.EventOperationCallback)
	if ev.Operation != op {
		t.Errorf("completion callback for operation %#x, want %#x", ev.Operation, op)
	}
	if got := api.GetOperationType(op); got != computecore.OperationTypeCreate {
		t.Errorf("operation type %v, want Create", got)
	}
	if err != nil {
		api.CloseComputeSystem(cs)
		return 0, fmt.Errorf("%w (result %s)", err, result)
	}
	return cs, nil
}

func TestStandInCreateAndProperties(t *testing.T) {
	api, d := standInAPI(t)
	doc := `{"Owner":"` + unicode + `","SchemaVersion":{"Major":2,"Minor":1}}`
	cs, err := createSystem(t, api, "c1", doc)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	var args wire.CreateSystemArgs
	if err := json.Unmarshal([]byte(d.lastArgs(wire.MethodCreateComputeSystem)), &args); err != nil {
		t.Fatal(err)
	}
	if args.ID != "c1" || args.Configuration != doc {
		t.Errorf("the daemon got id %q, configuration %q; want c1, %q", args.ID, args.Configuration, doc)
	}

	op, _ := api.CreateOperation(0, nil)
	defer api.CloseOperation(op)
	if err := api.GetComputeSystemProperties(cs, op, `{"PropertyTypes":[]}`); err != nil {
		t.Fatal(err)
	}
	props, err := api.WaitForOperationResult(op, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Id":"c1","Name":"` + unicode + `","State":"Running"}`; props != want {
		t.Errorf("properties %s, want %s", props, want)
	}
	var sa wire.SystemArgs
	if err := json.Unmarshal([]byte(d.lastArgs(wire.MethodGetComputeSystemProperties)), &sa); err != nil {
		t.Fatal(err)
	}
	if sa.System != (wire.SystemRef{ID: "c1", Instance: 7}) || sa.Document != `{"PropertyTypes":[]}` {
		t.Errorf("the daemon got %+v: want system c1 instance 7 (from the create reply) and the query", sa)
	}
}

func TestStandInErrors(t *testing.T) {
	api, _ := standInAPI(t)
	tests := []struct {
		name string
		call func() (string, error)
		want computecore.HRESULT
		doc  string
	}{
		{"create refused", func() (string, error) {
			_, err := createSystem(t, api, "exists", "{}")
			return "", err
		}, computecore.HCS_E_SYSTEM_ALREADY_EXISTS, "exists already " + unicode},
		{"open unknown", func() (string, error) {
			_, err := api.OpenComputeSystem("nope", computecore.GenericAll)
			return "", err
		}, computecore.HCS_E_SYSTEM_NOT_FOUND, ""},
		{"method the daemon lacks", func() (string, error) {
			cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
			if err != nil {
				return "", err
			}
			defer api.CloseComputeSystem(cs)
			op, _ := api.CreateOperation(0, nil)
			defer api.CloseOperation(op)
			if err := api.PauseComputeSystem(cs, op, ""); err != nil {
				return "", err
			}
			return api.WaitForOperationResult(op, 10_000)
		}, computecore.E_NOTIMPL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if tc.doc != "" && !strings.Contains(err.Error(), tc.doc) {
				t.Errorf("error %v does not carry the result document's %q", err, tc.doc)
			}
		})
	}
}

func TestStandInOperationStates(t *testing.T) {
	api, _ := standInAPI(t)
	op, _ := api.CreateOperation(0, nil)
	defer api.CloseOperation(op)
	if _, err := api.GetOperationResult(op); !errors.Is(err, computecore.HCS_E_OPERATION_NOT_STARTED) {
		t.Errorf("result of an unused operation: %v, want HCS_E_OPERATION_NOT_STARTED", err)
	}
	if err := api.SetOperationContext(op, 5); err != nil || api.GetOperationContext(op) != 5 {
		t.Errorf("operation context: %v, %d", err, api.GetOperationContext(op))
	}
}

func TestStandInSystemExitEvent(t *testing.T) {
	api, _ := standInAPI(t)
	cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	evs := make(events, 4)
	if err := api.SetComputeSystemCallback(cs, computecore.EventOptionNone, 1, evs.callback); err != nil {
		t.Fatal(err)
	}
	op, _ := api.CreateOperation(0, nil)
	defer api.CloseOperation(op)
	if err := api.TerminateComputeSystem(cs, op, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitForOperationResult(op, 10_000); err != nil {
		t.Fatal(err)
	}
	ev := evs.next(t, computecore.EventSystemExited)
	if ev.EventData != `{"Status":0,"ExitType":"Forced"}` {
		t.Errorf("exit event data %q", ev.EventData)
	}
	doc, err := api.WaitForComputeSystemExit(cs, 10_000)
	if err != nil || doc != ev.EventData {
		t.Errorf("WaitForComputeSystemExit = %q, %v; want the event's document", doc, err)
	}
}

func TestStandInProcessStdio(t *testing.T) {
	api, _ := standInAPI(t)
	cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	op, _ := api.CreateOperation(0, nil)
	defer api.CloseOperation(op)
	p, err := api.CreateProcess(cs, `{"CommandLine":"upper","CreateStdInPipe":true,"CreateStdOutPipe":true,"CreateStdErrPipe":true}`, op, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseProcess(p)
	info, _, err := api.WaitForOperationResultAndProcessInfo(op, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if info.ProcessID != 42 || info.StdInput == 0 || info.StdOutput == 0 || info.StdError == 0 {
		t.Fatalf("process information %+v: want pid 42 and three handles", info)
	}
	evs := make(events, 4)
	if err := api.SetProcessCallback(p, computecore.EventOptionNone, 0, evs.callback); err != nil {
		t.Fatal(err)
	}
	stdin := os.NewFile(info.StdInput, "stdin")
	stdout := os.NewFile(info.StdOutput, "stdout")
	stderr := os.NewFile(info.StdError, "stderr")
	defer stdout.Close()
	defer stderr.Close()
	if _, err := stdin.Write([]byte("hello " + unicode)); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close() // end of input reaches the process
	type read struct {
		b   []byte
		err error
	}
	outc, errc := make(chan read, 1), make(chan read, 1)
	go func() { b, err := io.ReadAll(stdout); outc <- read{b, err} }()
	go func() { b, err := io.ReadAll(stderr); errc <- read{b, err} }()
	for _, s := range []struct {
		name string
		c    chan read
		want string
	}{{"stdout", outc, strings.ToUpper("hello " + unicode)}, {"stderr", errc, "done"}} {
		select {
		case r := <-s.c:
			if r.err != nil || string(r.b) != s.want {
				t.Errorf("%s: %q, %v; want %q then end of file", s.name, r.b, r.err, s.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no end of file within 10s", s.name)
		}
	}
	ev := evs.next(t, computecore.EventProcessExited)
	if ev.EventData != `{"Status":0,"ExitCode":3}` {
		t.Errorf("process exit data %q", ev.EventData)
	}
	if doc, err := api.WaitForProcessExit(p, 10_000); err != nil || doc != ev.EventData {
		t.Errorf("WaitForProcessExit = %q, %v", doc, err)
	}
}

// TestStandInArgs: every method's args are what hcsemu decodes (strictly) for it.
func TestStandInArgs(t *testing.T) {
	api, d := standInAPI(t)
	cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	p, err := api.OpenProcess(cs, 42, computecore.GenericAll)
	if err != nil {
		t.Fatalf("OpenProcess: %v", err)
	}
	defer api.CloseProcess(p)
	withOp := func(name string, f func(op computecore.Operation) error) {
		op, _ := api.CreateOperation(0, nil)
		defer api.CloseOperation(op)
		if err := f(op); err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if _, err := api.WaitForOperationResult(op, 10_000); errors.Is(err, computecore.HCS_E_PROTOCOL_ERROR) {
			t.Errorf("%s: the daemon could not read the args: %v", name, err)
		}
	}
	withOp("Enumerate", func(op computecore.Operation) error { return api.EnumerateComputeSystems(`{"Ids":["c1"]}`, op) })
	withOp("Enumerate without query", func(op computecore.Operation) error { return api.EnumerateComputeSystems("", op) })
	withOp("Start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	withOp("Shutdown", func(op computecore.Operation) error { return api.ShutDownComputeSystem(cs, op, "{}") })
	withOp("Resume", func(op computecore.Operation) error { return api.ResumeComputeSystem(cs, op, "") })
	withOp("Modify", func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"x"}`, 0)
	})
	withOp("TerminateProcess", func(op computecore.Operation) error { return api.TerminateProcess(p, op, "") })
	withOp("SignalProcess", func(op computecore.Operation) error { return api.SignalProcess(p, op, `{"Signal":"CtrlC"}`) })
	withOp("GetProcessProperties", func(op computecore.Operation) error { return api.GetProcessProperties(p, op, "") })
	withOp("ModifyProcess", func(op computecore.Operation) error {
		return api.ModifyProcess(p, op, `{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`)
	})
	var pa wire.ProcessArgs
	if err := json.Unmarshal([]byte(d.lastArgs(wire.MethodSignalProcess)), &pa); err != nil {
		t.Fatal(err)
	}
	if pa.Process != (wire.ProcessRef{System: wire.SystemRef{ID: "c1", Instance: 7}, PID: 42}) || pa.Document != `{"Signal":"CtrlC"}` {
		t.Errorf("SignalProcess args %+v", pa)
	}
	if d.lastArgs(wire.MethodEnumerateComputeSystems) != "{}" {
		t.Errorf("Enumerate without a query sent args %s, want {}", d.lastArgs(wire.MethodEnumerateComputeSystems))
	}
}

func TestStandInServiceProperties(t *testing.T) {
	api, _ := standInAPI(t)
	doc, err := api.GetServiceProperties(`{"PropertyTypes":["Basic"]}`)
	if err != nil || doc != `{"Properties":[{"Version":"10.0.20348.1"}]}` {
		t.Errorf("GetServiceProperties = %q, %v", doc, err)
	}
}
