package hcs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// useFake returns a fake computecore.API and, in its client field, a Client of it.
func useFake(t *testing.T) *fakeAPI {
	t.Helper()
	f := newFake()
	f.client = NewClient(f)
	return f
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		hr       computecore.HRESULT
		sentinel error // nil: none
		kind     func(error) bool
	}{
		{computecore.HCS_E_SYSTEM_NOT_FOUND, ErrNotFound, errdefs.IsNotFound},
		{0xC037010E, ErrNotFound, errdefs.IsNotFound}, // the older severity form
		{computecore.E_ELEMENT_NOT_FOUND, ErrNotFound, errdefs.IsNotFound},
		{computecore.HCS_E_SYSTEM_ALREADY_EXISTS, ErrAlreadyExists, errdefs.IsAlreadyExists},
		{computecore.HCS_E_INVALID_STATE, ErrInvalidState, errdefs.IsFailedPrecondition},
		{computecore.HCS_E_SYSTEM_ALREADY_STOPPED, ErrAlreadyStopped, errdefs.IsFailedPrecondition},
		{computecore.HCS_E_PROCESS_ALREADY_STOPPED, ErrProcessAlreadyStopped, errdefs.IsFailedPrecondition},
		{computecore.HCS_E_OPERATION_PENDING, ErrOperationPending, errdefs.IsUnavailable},
		{computecore.HCS_E_ACCESS_DENIED, ErrAccessDenied, errdefs.IsPermissionDenied},
		{computecore.E_ACCESSDENIED, ErrAccessDenied, errdefs.IsPermissionDenied},
		{computecore.HCS_E_UNEXPECTED_EXIT, ErrUnexpectedExit, errdefs.IsAborted},
		{computecore.HCS_E_SERVICE_DISCONNECT, ErrServiceDisconnected, errdefs.IsUnavailable},
		{computecore.E_FILE_NOT_FOUND, nil, errdefs.IsNotFound},
		{computecore.HCS_E_INVALID_JSON, nil, errdefs.IsInvalidArgument},
		{computecore.E_INVALIDARG, nil, errdefs.IsInvalidArgument},
		{computecore.HCS_E_IMAGE_MISMATCH, nil, errdefs.IsFailedPrecondition},
		{computecore.E_NOTIMPL, nil, errdefs.IsNotImplemented},
		{computecore.HCS_E_OPERATION_TIMEOUT, nil, errdefs.IsDeadlineExceeded},
	}
	all := []error{ErrNotFound, ErrAlreadyExists, ErrInvalidState, ErrAlreadyStopped, ErrProcessAlreadyStopped,
		ErrOperationPending, ErrAccessDenied, ErrUnexpectedExit, ErrServiceDisconnected}
	for _, tc := range tests {
		t.Run(tc.hr.Error(), func(t *testing.T) {
			err := error(&Error{Op: "StartComputeSystem", ID: "c1", Err: tc.hr})
			if !errors.Is(err, tc.hr) {
				t.Errorf("errors.Is(err, %v) = false", tc.hr)
			}
			for _, s := range all {
				if got, want := errors.Is(err, s), s == tc.sentinel; got != want {
					t.Errorf("errors.Is(err, %q) = %v, want %v", s, got, want)
				}
			}
			if !tc.kind(err) {
				t.Errorf("errdefs kind does not match %v", err)
			}
			var e *Error
			if !errors.As(err, &e) || e.HRESULT() != tc.hr {
				t.Errorf("HRESULT() = %v, want %v", e.HRESULT(), tc.hr)
			}
		})
	}
}

func TestCallFailureCarriesDetail(t *testing.T) {
	f := useFake(t)
	f.results["StartComputeSystem"] = fakeResult{
		err: computecore.HCS_E_INVALID_STATE,
		doc: `{"Error":-2143878907,"ErrorMessage":"The requested operation is not valid in the current state","ErrorEvents":[{"Message":"system c1 is Running"}]}`,
	}
	ctx := context.Background()
	s, err := f.client.CreateComputeSystem(ctx, "c1", &schema2.ComputeSystem{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Start(ctx)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Start error %v is not an *Error", err)
	}
	if e.Op != "StartComputeSystem" || e.ID != "c1" {
		t.Errorf("Op, ID = %q, %q", e.Op, e.ID)
	}
	for _, want := range []string{"not valid in the current state", "system c1 is Running"} {
		if !strings.Contains(e.Detail, want) {
			t.Errorf("Detail %q lacks %q", e.Detail, want)
		}
	}
	if !errors.Is(err, ErrInvalidState) || !errdefs.IsFailedPrecondition(err) {
		t.Errorf("%v: not ErrInvalidState/FailedPrecondition", err)
	}
	if !strings.Contains(err.Error(), `StartComputeSystem "c1"`) {
		t.Errorf("message %q does not name the operation and the system", err)
	}
}

func TestTimeoutCancelsOperation(t *testing.T) {
	tests := []struct {
		name string
		call func(context.Context, *System) error
		op   string
	}{
		{"start", func(ctx context.Context, s *System) error { return s.Start(ctx) }, "StartComputeSystem"},
		{"shutdown", func(ctx context.Context, s *System) error { return s.Shutdown(ctx) }, "ShutDownComputeSystem"},
		{"modify", func(ctx context.Context, s *System) error {
			return s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMemory, RequestType: schema2.RequestTypeUpdate, Settings: 100})
		}, "ModifyComputeSystem"},
		{"properties", func(ctx context.Context, s *System) error { _, err := s.Properties(ctx); return err }, "GetComputeSystemProperties"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := useFake(t)
			s, err := f.client.CreateComputeSystem(context.Background(), "slow-1", "{}")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f.hang[tc.op] = true
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err = tc.call(ctx, s)
			if time.Since(start) > 5*time.Second {
				t.Fatalf("call took %v", time.Since(start))
			}
			if !errors.Is(err, context.DeadlineExceeded) || !errdefs.IsDeadlineExceeded(err) {
				t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.op) || !strings.Contains(msg, "slow-1") {
				t.Errorf("error %q does not name %s and the system id", msg, tc.op)
			}
			f.mu.Lock()
			cancelled := len(f.cancelled)
			f.mu.Unlock()
			if cancelled != 1 {
				t.Errorf("%d operations cancelled, want 1", cancelled)
			}
			// The abandoned operation is closed once its wait returns.
			deadline := time.Now().Add(5 * time.Second)
			for {
				f.mu.Lock()
				n := len(f.ops)
				f.mu.Unlock()
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d operations left open", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestContextDoneBeforeCall(t *testing.T) {
	f := useFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.client.CreateComputeSystem(ctx, "never", "{}")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v is not context.Canceled", err)
	}
	if len(f.systems) != 0 || len(f.closedOps) != 0 {
		t.Errorf("a system or operation was made after the context ended")
	}
}

func TestCreateFailureReleasesHandle(t *testing.T) {
	f := useFake(t)
	f.results["CreateComputeSystem"] = fakeResult{err: computecore.HCS_E_SYSTEM_ALREADY_EXISTS}
	_, err := f.client.CreateComputeSystem(context.Background(), "dup", "{}")
	if !errors.Is(err, ErrAlreadyExists) || !errdefs.IsAlreadyExists(err) {
		t.Fatalf("error %v is not ErrAlreadyExists", err)
	}
	if len(f.systems) != 0 {
		t.Errorf("handle of the failed system not closed")
	}
}

func TestSystemExitEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   computecore.Event
		want error // nil: clean exit
	}{
		{"graceful", computecore.Event{Type: computecore.EventSystemExited, EventData: `{"Status":0,"ExitType":"GracefulExit"}`}, nil},
		{"forced", computecore.Event{Type: computecore.EventSystemExited, EventData: `{"Status":0,"ExitType":"ForcedExit"}`}, nil},
		{"unexpected", computecore.Event{Type: computecore.EventSystemExited, EventData: `{"Status":0,"ExitType":"UnexpectedExit"}`}, ErrUnexpectedExit},
		{"failed status", computecore.Event{Type: computecore.EventSystemExited, EventData: `{"Status":-2143878906}`}, ErrUnexpectedExit},
		{"service gone", computecore.Event{Type: computecore.EventServiceDisconnect}, ErrServiceDisconnected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := useFake(t)
			s, err := f.client.CreateComputeSystem(context.Background(), "ev", "{}")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			select {
			case <-s.Exited():
				t.Fatal("Exited closed before any event")
			default:
			}
			f.fireSystem(s.handle, tc.ev)
			select {
			case <-s.Exited():
			case <-time.After(5 * time.Second):
				t.Fatal("Exited not closed")
			}
			got := s.ExitError()
			if tc.want == nil && got != nil {
				t.Errorf("ExitError = %v, want nil", got)
			}
			if tc.want != nil && !errors.Is(got, tc.want) {
				t.Errorf("ExitError = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProcessExit(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		props    string // GetProcessProperties result
		wantCode int
		wantErr  bool
	}{
		{"code in event", `{"Status":0,"ExitCode":3}`, `{"ProcessId":7}`, 3, false},
		{"code from properties", `{"Status":-2147467259}`, `{"ProcessId":7,"Exited":true,"ExitCode":9}`, 9, false},
		{"unknown", `{"Status":-2147467259}`, `{"ProcessId":7}`, -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := useFake(t)
			s, err := f.client.CreateComputeSystem(context.Background(), "px", "{}")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			f.results["CreateProcess"] = fakeResult{info: computecore.ProcessInformation{ProcessID: 7, StdOutput: r.Fd()}}
			f.results["GetProcessProperties"] = fakeResult{doc: `{"ProcessId":7}`}
			p, err := s.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "x", CreateStdOutPipe: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			stdin, stdout, stderr := p.Stdio()
			if stdin != nil || stderr != nil || stdout == nil {
				t.Fatalf("Stdio = %v, %v, %v; want only stdout", stdin, stdout, stderr)
			}
			if _, err := w.Write([]byte("hi")); err != nil {
				t.Fatal(err)
			}
			w.Close()
			buf := make([]byte, 2)
			if _, err := stdout.Read(buf); err != nil || string(buf) != "hi" {
				t.Errorf("stdout read %q, %v", buf, err)
			}
			stdout.Close()
			if p.Pid() != 7 || p.SystemID() != "px" {
				t.Errorf("Pid, SystemID = %d, %q", p.Pid(), p.SystemID())
			}
			if _, err := p.ExitCode(); !errors.Is(err, ErrInvalidState) {
				t.Errorf("ExitCode before exit: %v, want ErrInvalidState", err)
			}
			f.mu.Lock()
			f.results["GetProcessProperties"] = fakeResult{doc: tc.props}
			f.mu.Unlock()
			f.fireProcess(p.handle, computecore.Event{Type: computecore.EventProcessExited, EventData: tc.data})
			select {
			case <-p.Exited():
			case <-time.After(5 * time.Second):
				t.Fatal("Exited not closed")
			}
			code, err := p.ExitCode()
			if code != tc.wantCode || (err != nil) != tc.wantErr {
				t.Errorf("ExitCode = %d, %v; want %d, error %v", code, err, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestProcessExitedBeforeSubscribe(t *testing.T) {
	f := useFake(t)
	s, err := f.client.CreateComputeSystem(context.Background(), "fast", "{}")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.results["GetProcessProperties"] = fakeResult{doc: `{"ProcessId":12,"Exited":true,"ExitCode":4}`}
	p, err := s.OpenProcess(context.Background(), 12)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	select {
	case <-p.Exited():
	default:
		t.Fatal("opened process that had exited: Exited not closed")
	}
	if code, err := p.ExitCode(); code != 4 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
}

func TestProcessSettledWhenSystemExits(t *testing.T) {
	f := useFake(t)
	s, err := f.client.CreateComputeSystem(context.Background(), "sx", "{}")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.results["GetProcessProperties"] = fakeResult{doc: `{"ProcessId":5}`}
	p, err := s.OpenProcess(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.fireSystem(s.handle, computecore.Event{Type: computecore.EventServiceDisconnect})
	select {
	case <-p.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("process Exited not closed after its system exited")
	}
	if _, err := p.ExitCode(); !errors.Is(err, ErrServiceDisconnected) {
		t.Errorf("ExitCode error %v, want ErrServiceDisconnected", err)
	}
}

func TestSignalAndKillResults(t *testing.T) {
	f := useFake(t)
	s, err := f.client.CreateComputeSystem(context.Background(), "sig", "{}")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.results["GetProcessProperties"] = fakeResult{doc: `{"ProcessId":5}`}
	p, err := s.OpenProcess(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, err := p.Signal(ctx, &schema2.SignalProcessOptions{Signal: schema2.SignalCtrlC}); !ok || err != nil {
		t.Errorf("Signal = %v, %v", ok, err)
	}
	f.results["TerminateProcess"] = fakeResult{err: computecore.HCS_E_PROCESS_ALREADY_STOPPED}
	ok, err := p.Kill(ctx)
	if ok || !errors.Is(err, ErrProcessAlreadyStopped) {
		t.Errorf("Kill = %v, %v; want false, ErrProcessAlreadyStopped", ok, err)
	}
	var e *Error
	if errors.As(err, &e); e == nil || e.Pid != 5 || e.ID != "sig" || e.Op != "TerminateProcess" {
		t.Errorf("Kill error %#v does not name the process", e)
	}
	p.Close()
	if _, err := p.Kill(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Kill after Close: %v, want ErrClosed", err)
	}
}

func TestHostOSVersion(t *testing.T) {
	f := useFake(t)
	f.service = `{"Properties":[{"SupportedSchemaVersions":[{"Major":2,"Minor":1}],"OsVersion":"10.0.20348.1"}]}`
	v, err := f.client.HostOSVersion(context.Background())
	if err != nil || v != "10.0.20348.1" {
		t.Fatalf("HostOSVersion = %q, %v", v, err)
	}
}

func TestEnumerate(t *testing.T) {
	f := useFake(t)
	f.results["EnumerateComputeSystems"] = fakeResult{doc: `[{"Id":"a","SystemType":"Container","State":"Running"},{"Id":"b","State":"Created"}]`}
	got, err := f.client.EnumerateComputeSystems(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Id != "a" || got[0].State != schema2.StateRunning || got[1].Id != "b" {
		t.Errorf("Enumerate = %+v", got)
	}
}

func TestAbandonedCreateProcessReleasesHandle(t *testing.T) {
	f := useFake(t)
	s, err := f.client.CreateComputeSystem(context.Background(), "ab", "{}")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.hang["CreateProcess"] = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "x"})
	var e *Error
	if !errors.As(err, &e) || e.Op != "CreateProcess" || e.ID != "ab" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateProcess with a hung operation: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.procs)
		f.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned process handle was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNoService(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("on Windows computecore.New loads computecore.dll; there is no daemon to miss")
	}
	addr := filepath.Join(t.TempDir(), "nobody.sock")
	t.Setenv("HCSEMU_ADDRESS", addr)
	_, err := NewHostClient().OpenComputeSystem(context.Background(), "x")
	if !errors.Is(err, ErrServiceDisconnected) || !errdefs.IsUnavailable(err) {
		t.Fatalf("with no daemon: %v, want ErrServiceDisconnected (Unavailable)", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the address %s", err, addr)
	}
}
