package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/protocols/stats"
)

// fakePod is a Pod whose start and stop can fail and which can end by itself (a VM crash).
type fakePod struct {
	mu       sync.Mutex
	startErr error
	stopErr  error
	starts   int
	stops    int
	released int
	status   uint32
	once     sync.Once
	exit     chan struct{}
	// block, when set, holds Start until it is closed.
	block chan struct{}
}

func newFakePod() *fakePod { return &fakePod{exit: make(chan struct{})} }

func (p *fakePod) Start(context.Context) (uint32, error) {
	if p.block != nil {
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	if p.startErr != nil {
		return 0, p.startErr
	}
	return 4242, nil
}

func (p *fakePod) Stop(context.Context) error {
	p.mu.Lock()
	p.stops++
	err := p.stopErr
	p.mu.Unlock()
	if err != nil {
		return err
	}
	p.end(0)
	return nil
}

// end ends the pod with status, as a VM crash would.
func (p *fakePod) end(status uint32) {
	p.once.Do(func() {
		p.mu.Lock()
		p.status = status
		p.mu.Unlock()
		close(p.exit)
	})
}

func (p *fakePod) Exited() <-chan struct{} { return p.exit }
func (p *fakePod) ExitStatus() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}
func (p *fakePod) Release(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released++
	return nil
}
func (p *fakePod) Statistics(context.Context) (*stats.Statistics, error) {
	return &stats.Statistics{}, nil
}

const testNetNS = "6f1c1d0e-2a3b-4c5d-8e9f-0a1b2c3d4e5f"

func newSandbox(t *testing.T, pod Pod) (*Sandbox, string) {
	t.Helper()
	bundle := t.TempDir()
	s, err := Create(context.Background(), Config{ID: "pod1", Bundle: bundle, Kind: KindProcess, NetNS: testNetNS, Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	return s, bundle
}

func wantKind(t *testing.T, err error, kind func(error) bool, substr string) {
	t.Helper()
	if err == nil || !kind(err) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("got %v, want an error of the right kind containing %q", err, substr)
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, bundle := newSandbox(t, pod)
	if !IsBundle(bundle) {
		t.Fatal("Create recorded no state in the bundle")
	}
	if st := s.Status(); st.State != StateNotReady || st.ID != "pod1" || st.NetNS != testNetNS || st.CreatedAt.IsZero() {
		t.Fatalf("created: status %+v", st)
	}
	wantKind(t, s.Join("c1"), errdefs.IsFailedPrecondition, "created, not ready")

	pid, created, err := s.Start(ctx)
	if err != nil || pid != 4242 || created.IsZero() {
		t.Fatalf("Start: %d %v %v", pid, created, err)
	}
	if st, _ := readState(bundle); st == nil || st.Pid != 4242 {
		t.Fatalf("the started pod's pid is not in the bundle state: %+v", st)
	}
	if st := s.Status(); st.State != StateReady || st.Pid != 4242 {
		t.Fatalf("ready: status %+v", st)
	}
	if err := s.Join("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Metrics(ctx); err != nil {
		t.Fatal(err)
	}

	waited := make(chan error, 1)
	go func() {
		_, _, err := s.Wait(ctx)
		waited <- err
	}()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.State != StateNotReady || st.ExitedAt.IsZero() {
		t.Fatalf("stopped: status %+v", st)
	}
	// kubelet repeats StopPodSandbox until it succeeds.
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	wantKind(t, s.Join("c2"), errdefs.IsFailedPrecondition, "stopped, not ready")
	_, err = s.Metrics(ctx)
	wantKind(t, err, errdefs.IsFailedPrecondition, "stopped, not ready")

	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if IsBundle(bundle) || pod.released != 1 {
		t.Fatalf("after Shutdown: state left %v, released %d times", IsBundle(bundle), pod.released)
	}
	wantKind(t, s.Shutdown(ctx), errdefs.IsNotFound, "shut down")
	_, _, err = s.Start(ctx)
	wantKind(t, err, errdefs.IsNotFound, "shut down")
	wantKind(t, s.Ping(), errdefs.IsNotFound, "shut down")
	if status, at, err := s.Wait(ctx); err != nil || status != 0 || at.IsZero() {
		t.Fatalf("Wait after Shutdown: %d %v %v", status, at, err)
	}
}

// A pod that ends by itself (a utility VM crash) ends the sandbox: Wait returns its status.
func TestPodEndsByItself(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pod.end(1)
	status, at, err := s.Wait(ctx)
	if err != nil || status != 1 || at.IsZero() {
		t.Fatalf("Wait: %d %v %v", status, at, err)
	}
	if st := s.Status(); st.State != StateNotReady {
		t.Fatalf("status %+v", st)
	}
	wantKind(t, s.Join("c1"), errdefs.IsFailedPrecondition, "stopped")
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if pod.stops != 0 {
		t.Fatalf("Shutdown stopped a pod that had ended: %d stops", pod.stops)
	}
}

func TestStartFailureAndRetry(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	pod.startErr = errors.New("boom")
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start: %v", err)
	}
	if st := s.Status(); st.State != StateNotReady {
		t.Fatalf("status %+v", st)
	}
	pod.startErr = nil
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatalf("Start after a failed one: %v", err)
	}
	_, _, err := s.Start(ctx)
	wantKind(t, err, errdefs.IsFailedPrecondition, "cannot start a ready sandbox")
}

// containerd calls ShutdownSandbox after a failed CreateSandbox or StartSandbox: a sandbox that
// never ran is stopped (exit 0) and released.
func TestShutdownNeverStarted(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, bundle := newSandbox(t, pod)
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if pod.stops != 0 || pod.released != 1 || IsBundle(bundle) {
		t.Fatalf("stops %d, released %d, state left %v", pod.stops, pod.released, IsBundle(bundle))
	}
	if status, _, err := s.Wait(ctx); err != nil || status != 0 {
		t.Fatalf("Wait: %d %v", status, err)
	}
}

// RunPodSandbox's rollback shuts a ready sandbox down: it is stopped first.
func TestShutdownReady(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if pod.stops != 1 || pod.released != 1 {
		t.Fatalf("stops %d, released %d", pod.stops, pod.released)
	}
}

func TestStopFailureLeavesReady(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pod.stopErr = errors.New("stuck")
	if err := s.Stop(ctx); err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("Stop: %v", err)
	}
	if st := s.Status(); st.State != StateReady {
		t.Fatalf("after a failed Stop: %+v", st)
	}
	wantKind(t, s.Shutdown(ctx), func(error) bool { return true }, "stuck")
	pod.stopErr = nil
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown retried: %v", err)
	}
}

// While the pod is being started, nothing else touches it: Stop asks to retry.
func TestStopWhileStarting(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	pod.block = make(chan struct{})
	s, _ := newSandbox(t, pod)
	started := make(chan error, 1)
	go func() {
		_, _, err := s.Start(ctx)
		started <- err
	}()
	if s.Status().State == StateNotReady {
		err := s.Stop(ctx)
		if errdefs.IsUnavailable(err) {
			wantKind(t, s.Shutdown(ctx), errdefs.IsUnavailable, "being started")
			close(pod.block)
			if err := <-started; err != nil {
				t.Fatal(err)
			}
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		// Start had not begun yet: the created sandbox was stopped.
		if err != nil {
			t.Fatal(err)
		}
		close(pod.block)
		if err := <-started; err == nil {
			t.Fatal("Start of a stopped sandbox succeeded")
		}
		return
	}
	close(pod.block)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentStops(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- s.Stop(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if pod.stops != 1 {
		t.Fatalf("the pod was stopped %d times", pod.stops)
	}
}

func TestWaitCancelled(t *testing.T) {
	pod := newFakePod()
	s, _ := newSandbox(t, pod)
	if _, _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v", err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Bundle: t.TempDir(), Pod: newFakePod()}, "sandbox_id: empty"},
		{Config{ID: "p", Bundle: "relative", Pod: newFakePod()}, `bundle_path "relative"`},
		{Config{ID: "p", Bundle: t.TempDir()}, "no pod"},
		{Config{ID: "p", Bundle: filepath.Join(t.TempDir(), "missing"), Pod: newFakePod()}, "sandbox state"},
	} {
		_, err := Create(ctx, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Create(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}

// The delete action after a killed shim: the recorded sandbox is cleaned up, twice is fine,
// and a bundle without sandbox state is none of Cleanup's business.
func TestCleanupAfterKilledShim(t *testing.T) {
	ctx := context.Background()
	pod := newFakePod()
	s, bundle := newSandbox(t, pod)
	if _, _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The shim is killed here: s is never stopped.
	pid, err := Cleanup(ctx, bundle, nil)
	if err != nil || pid != 4242 {
		t.Fatalf("Cleanup: %d %v", pid, err)
	}
	if IsBundle(bundle) {
		t.Fatal("Cleanup left the sandbox state")
	}
	if pid, err := Cleanup(ctx, bundle, nil); err != nil || pid != 0 {
		t.Fatalf("second Cleanup: %d %v", pid, err)
	}
}

func TestCleanupRefusesUnknownKind(t *testing.T) {
	bundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, StateFile), []byte(`{"id":"p","kind":"lcow"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Cleanup(context.Background(), bundle, nil)
	wantKind(t, err, errdefs.IsInvalidArgument, `kind "lcow"`)
	if !IsBundle(bundle) {
		t.Fatal("a refused Cleanup removed the state")
	}
}

func TestProcessPod(t *testing.T) {
	if _, err := NewProcessPod("not-a-guid"); err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), `netns_path "not-a-guid"`) {
		t.Fatalf("NewProcessPod: %v", err)
	}
	p, err := NewProcessPod("")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newSandbox(t, p)
	ctx := context.Background()
	pid, _, err := s.Start(ctx)
	if err != nil || pid != uint32(os.Getpid()) {
		t.Fatalf("Start: %d %v", pid, err)
	}
	st, err := s.Metrics(ctx)
	if err != nil || st.GetWindows().GetProcessor() == nil || st.GetWindows().GetTimestamp() == nil {
		t.Fatalf("Metrics: %v %v", st, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := s.Wait(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-done // Wait returns once Shutdown stopped the pod
}
