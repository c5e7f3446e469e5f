package shim

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/diag"
)

// pipeListener is an in-memory net.Listener: each Dial hands the server one end of a net.Pipe.
type pipeListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) Dial() (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-memory" }

// serveDiag serves svc as the shim does (run.go: taskServices with its interceptor, which
// registers the diag service beside the task API) and returns a diag client of it.
func serveDiag(t *testing.T, svc *service) diag.ShimDiagService {
	t.Helper()
	ts := taskServices{svc}
	server, err := ttrpc.NewServer(ttrpc.WithUnaryServerInterceptor(ts.UnaryServerInterceptor()))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.RegisterTTRPC(server); err != nil {
		t.Fatal(err)
	}
	l := newPipeListener()
	served := make(chan error, 1)
	go func() { served <- server.Serve(context.Background(), l) }()
	conn, err := l.Dial()
	if err != nil {
		t.Fatal(err)
	}
	client := ttrpc.NewClient(conn)
	t.Cleanup(func() {
		client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			t.Errorf("ttrpc server shutdown: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, ttrpc.ErrServerClosed) {
			t.Errorf("ttrpc serve: %v", err)
		}
	})
	return diag.NewShimDiagClient(client)
}

func TestDiagPidAndStacks(t *testing.T) {
	h := newHarness(t)
	c := serveDiag(t, h.svc)
	ctx := context.Background()

	pid, err := c.DiagPid(ctx, &diag.PidRequest{})
	if err != nil {
		t.Fatalf("DiagPid: %v", err)
	}
	if int(pid.GetPid()) != os.Getpid() {
		t.Errorf("DiagPid = %d, want %d", pid.GetPid(), os.Getpid())
	}

	st, err := c.DiagStacks(ctx, &diag.StacksRequest{})
	if err != nil {
		t.Fatalf("DiagStacks: %v", err)
	}
	// All goroutines: the server's handler and this test's own goroutine are both in it.
	for _, want := range []string{"diagService.DiagStacks", "TestDiagPidAndStacks"} {
		if !strings.Contains(st.GetStacks(), want) {
			t.Errorf("DiagStacks lacks %q:\n%.2000s", want, st.GetStacks())
		}
	}
	if st.GetGuestStacks() != "" {
		t.Errorf("guest stacks %q from a shim with no guest", st.GetGuestStacks())
	}
}

func TestGoroutineStacksLimit(t *testing.T) {
	tests := []struct {
		limit   int
		wantCut bool
	}{
		{limit: 512, wantCut: true},
		{limit: maxStacksSize, wantCut: false},
	}
	for _, tc := range tests {
		s := goroutineStacks(tc.limit)
		cut := strings.HasSuffix(s, "goroutine dump cut at "+strconv.Itoa(tc.limit)+" bytes\n")
		if cut != tc.wantCut {
			t.Errorf("limit %d: cut = %v, want %v (len %d)", tc.limit, cut, tc.wantCut, len(s))
		}
		if !strings.HasPrefix(s, "goroutine ") {
			t.Errorf("limit %d: dump starts %.40q", tc.limit, s)
		}
	}
}

func TestDiagTasks(t *testing.T) {
	h := newHarness(t)
	c := serveDiag(t, h.svc)
	ctx := context.Background()

	got, err := c.DiagTasks(ctx, &diag.TasksRequest{Execs: true})
	if err != nil || len(got.GetTasks()) != 0 {
		t.Fatalf("DiagTasks of an empty shim = %v, %v; want no tasks", got, err)
	}

	// c1 runs with a created exec e1 and a running exec e2; c2 is created, not started.
	h.createStart(h.bundle("c1", testSpec()))
	if _, err := h.svc.Create(ctx, h.bundle("c2", testSpec())); err != nil {
		t.Fatal(err)
	}
	spec, err := typeurl.MarshalAnyToProto(&specs.Process{Args: []string{"cmd", "/c", "dir"}, Cwd: `C:\`})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e2", "e1"} {
		if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "c1", ExecID: id, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "c1", ExecID: "e2"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		execs bool
		want  string
	}{
		{false, "c1[] c2[]"},
		{true, "c1[c1=running e1=created e2=running] c2[c2=created]"},
	}
	for _, tc := range tests {
		resp, err := c.DiagTasks(ctx, &diag.TasksRequest{Execs: tc.execs})
		if err != nil {
			t.Fatalf("DiagTasks(execs=%v): %v", tc.execs, err)
		}
		if s := tasksString(resp); s != tc.want {
			t.Errorf("DiagTasks(execs=%v) = %s, want %s", tc.execs, s, tc.want)
		}
	}
}

// tasksString renders a TasksResponse as "task[exec=state …] …".
func tasksString(r *diag.TasksResponse) string {
	var parts []string
	for _, tk := range r.GetTasks() {
		var execs []string
		for _, e := range tk.GetExecs() {
			execs = append(execs, e.GetId()+"="+e.GetState())
		}
		parts = append(parts, tk.GetId()+"["+strings.Join(execs, " ")+"]")
	}
	return strings.Join(parts, " ")
}

// TestDiagUtilityVMCalls: the calls that need a utility VM answer NotImplemented (gRPC
// Unimplemented on the wire) in a shim without a Hyper-V pod, saying why.
func TestDiagUtilityVMCalls(t *testing.T) {
	h := newHarness(t)
	c := serveDiag(t, h.svc)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
	}{
		{"DiagExecInHost", func() error {
			_, err := c.DiagExecInHost(ctx, &diag.ExecProcessRequest{Args: []string{"cmd.exe"}})
			return err
		}},
		{"DiagShare", func() error {
			_, err := c.DiagShare(ctx, &diag.ShareRequest{HostPath: `C:\logs`, UvmPath: `C:\share`})
			return err
		}},
	}
	for _, tc := range tests {
		err := errgrpc.ToNative(tc.call())
		if !errdefs.IsNotImplemented(err) {
			t.Errorf("%s: %v, want NotImplemented", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), "serves no Hyper-V pod") {
			t.Errorf("%s: %q does not say why", tc.name, err)
		}
	}
}
