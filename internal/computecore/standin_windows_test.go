package computecore_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
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
// The daemon here is a small fake that speaks hcsemu's wire protocol, with the TCP extensions
// the stand-in expects (hack/wine/README.md): every connection starts with Authenticate and
// the daemon's key, a reply with stdio carries a "stdioToken", and each stream arrives on its
// own connection whose first frame after the key is AttachStdio{token, slot}.

// unicode is in every document so that the UTF-16 <-> UTF-8 conversions are checked.
const unicode = "wïndows ☃ 😀"

type fakeDaemon struct {
	l net.Listener
	// key is what every connection must present first, as hcsemu's --tcp-key-file; the
	// stand-in reads it from the file HCSEMU_TCP_KEY_FILE names.
	key string

	mu       sync.Mutex
	conn     net.Conn // the stand-in's control connection
	received map[string][]string
	streams  map[string]chan net.Conn // by token+slot
	released []string                 // holds dropped on slowCloseID, in order ("system", "process")
	// The upper process's input so far and whether it ended, of the newest process, and what
	// they were when a ModifyProcess(CloseHandle StdIn) arrived.
	stdinSeen    []byte
	stdinEOF     bool
	stdinAtClose string
	refused      []string // why each refused connection was refused
	sendMu       sync.Mutex
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
		daemon = &fakeDaemon{l: l, key: newKey(), received: map[string][]string{}, streams: map[string]chan net.Conn{}}
		go daemon.serve()
		if err := os.Setenv("HCSEMU_TCP_ADDRESS", l.Addr().String()); err != nil {
			daemonErr = err
			return
		}
		// A Windows path here; test.sh gives the real daemon's as a Linux path.
		var keyFile string
		if keyFile, daemonErr = writeKeyFile(daemon.key); daemonErr != nil {
			return
		}
		if err := os.Setenv(wire.KeyFileEnv, keyFile); err != nil {
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

// newKey returns a key as hcsemu makes them: 32 random bytes in hex.
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeKeyFile writes key to a file of a temporary folder that lives as long as the test
// binary (the stand-in reads it at every dial) and returns its path.
func writeKeyFile(key string) (string, error) {
	dir, err := os.MkdirTemp("", "standin-key")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "key")
	return p, os.WriteFile(p, []byte(key+"\n"), 0o600)
}

// admit is hcsemu's gate: the first frame must be Authenticate with the daemon's key, which is
// acknowledged; otherwise the connection is closed unanswered.
func (d *fakeDaemon) admit(c net.Conn, r io.Reader) bool {
	f, err := readFrame(r)
	why := ""
	var a wire.AuthenticateArgs
	switch {
	case err != nil:
		why = "no first frame: " + err.Error()
	case f.Method != wire.MethodAuthenticate:
		why = "first frame " + f.Method
	case f.DecodeArgs(&a) != nil || a.Key != d.key:
		why = "wrong key"
	}
	if why != "" {
		d.mu.Lock()
		d.refused = append(d.refused, why)
		d.mu.Unlock()
		_ = c.Close()
		return false
	}
	return wire.WriteFrame(c, &wire.Frame{ID: f.ID}) == nil
}

func (d *fakeDaemon) refusals() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.refused...)
}

func (d *fakeDaemon) handle(c net.Conn) {
	r := bufio.NewReader(c)
	if !d.admit(c, r) {
		return
	}
	first := true
	for {
		f, err := readFrame(r)
		if err != nil {
			return
		}
		if first && f.Method == wire.MethodAttachPipe {
			var a wire.AttachPipeArgs
			if err := f.DecodeArgs(&a); err != nil {
				_ = c.Close()
				return
			}
			pipeAttaches <- attachedPipe{args: a, c: &bufferedConn{Conn: c, r: r}}
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
		if a.ID != "c1" && a.ID != slowCloseID {
			fail(computecore.HCS_E_SYSTEM_NOT_FOUND, "")
			break
		}
		resp["reply"] = wire.SystemReply{Instance: 7}
	case wire.MethodCloseComputeSystem, wire.MethodCloseProcess:
		d.release(f)
	case wire.MethodModifyProcess:
		d.mu.Lock()
		d.stdinAtClose = fmt.Sprintf("%q eof=%v", d.stdinSeen, d.stdinEOF)
		d.mu.Unlock()
	case wire.MethodStartComputeSystem, wire.MethodCancel:
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
		if a.PID != 42 && a.System.ID != slowCloseID {
			fail(computecore.HCS_E_PROCESS_INFO_NOT_AVAILABLE, "")
			break
		}
		resp["reply"] = wire.ProcessReply{PID: a.PID}
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

// slowCloseID is a system whose handles the fake releases slowly, as a busy daemon might: the
// hold is dropped only after a pause, then answered.
const slowCloseID = "slow-close"

// release drops a connection's hold (CloseComputeSystem, CloseProcess). For slowCloseID it first
// waits, so that a close that does not wait for the daemon's answer returns before the hold is
// gone.
func (d *fakeDaemon) release(f *wire.Frame) {
	var sys wire.SystemArgs
	var proc wire.ProcessArgs
	kind, id := "system", ""
	if f.Method == wire.MethodCloseProcess {
		_ = json.Unmarshal(f.Args, &proc)
		kind, id = "process", proc.Process.System.ID
	} else {
		_ = json.Unmarshal(f.Args, &sys)
		id = sys.System.ID
	}
	if id != slowCloseID {
		return
	}
	time.Sleep(300 * time.Millisecond)
	d.mu.Lock()
	d.released = append(d.released, kind)
	d.mu.Unlock()
}

func (d *fakeDaemon) releasedHolds() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.released...)
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
	d.mu.Lock()
	d.stdinSeen, d.stdinEOF = nil, false
	d.mu.Unlock()
	var in []byte
	for buf := make([]byte, 4096); ; {
		n, err := conns[0].Read(buf)
		in = append(in, buf[:n]...)
		d.mu.Lock()
		d.stdinSeen, d.stdinEOF = append([]byte(nil), in...), err != nil
		d.mu.Unlock()
		if err != nil {
			break
		}
	}
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

// HcsCloseProcess and HcsCloseComputeSystem are synchronous: when they return, the daemon has
// dropped the handle's hold, so that a stopped system whose last handle closed cannot be opened
// again (the contract suite's client-death test depends on it). The fake takes its time to drop
// a hold on slowCloseID; a close that did not wait for its answer would return before that.
func TestStandInCloseWaitsForTheDaemon(t *testing.T) {
	api, d := standInAPI(t)
	cs, err := api.OpenComputeSystem(slowCloseID, computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	p, err := api.OpenProcess(cs, 43, computecore.GenericAll)
	if err != nil {
		api.CloseComputeSystem(cs)
		t.Fatal(err)
	}
	api.CloseProcess(p)
	if got := d.releasedHolds(); len(got) != 1 || got[0] != "process" {
		t.Errorf("after CloseProcess returned, the daemon had released %v; want [process]", got)
	}
	api.CloseComputeSystem(cs)
	if got := d.releasedHolds(); len(got) != 2 || got[1] != "system" {
		t.Errorf("after CloseComputeSystem returned, the daemon had released %v; want [process system]", got)
	}
}

// HcsModifyProcess(CloseHandle StdIn) ends the process's input after what the caller wrote into
// its stdin pipe before the call: on Windows the caller writes straight into the process's pipe.
// The stand-in relays stdin over its own connection, so it must have delivered those bytes, and
// the end of input, before the request reaches the daemon, which closes the process's stdin at
// once.
func TestStandInCloseStdinAfterWrites(t *testing.T) {
	api, d := standInAPI(t)
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
	stdin := os.NewFile(info.StdInput, "stdin")
	stdout := os.NewFile(info.StdOutput, "stdout")
	defer stdin.Close()
	defer stdout.Close()
	defer os.NewFile(info.StdError, "stderr").Close()
	for _, part := range []string{"written ", "before ", "the close"} {
		if _, err := stdin.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	mop, _ := api.CreateOperation(0, nil)
	defer api.CloseOperation(mop)
	if err := api.ModifyProcess(p, mop, `{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitForOperationResult(mop, 10_000); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	got := d.stdinAtClose
	d.mu.Unlock()
	if want := `"written before the close" eof=true`; got != want {
		t.Fatalf("when CloseHandle(StdIn) reached the daemon, stdin had brought %s; want %s", got, want)
	}
	b, err := io.ReadAll(stdout)
	if err != nil || string(b) != "WRITTEN BEFORE THE CLOSE" {
		t.Errorf("stdout %q, %v", b, err)
	}
}

// TestStandInKey: every connection of the stand-in presents the key in the file
// HCSEMU_TCP_KEY_FILE names, read at each dial; with a wrong key or none, the daemon refuses
// the connection and the caller gets no stream.
func TestStandInKey(t *testing.T) {
	api, d := standInAPI(t)
	cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	wrong, err := writeKeyFile(newKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, keyFile string
		refused       bool // the daemon saw the connection (without a key file there is none to send)
	}{
		{"another daemon's key", wrong, true},
		{"no key file", filepath.Join(filepath.Dir(wrong), "absent"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(wire.KeyFileEnv, tc.keyFile)
			before := len(d.refusals())
			op, _ := api.CreateOperation(0, nil)
			defer api.CloseOperation(op)
			p, err := api.CreateProcess(cs, `{"CommandLine":"upper","CreateStdOutPipe":true}`, op, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer api.CloseProcess(p)
			info, _, err := api.WaitForOperationResultAndProcessInfo(op, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			if info.StdOutput != 0 {
				os.NewFile(info.StdOutput, "stdout").Close()
				t.Errorf("a stdout handle %#x with %s: want none, the stream's connection refused", info.StdOutput, tc.name)
			}
			if got := d.refusals()[before:]; tc.refused && (len(got) != 3 || got[0] != "wrong key") {
				t.Errorf("the daemon refused %q; want the three streams' connections for a wrong key", got)
			}
		})
	}
}
