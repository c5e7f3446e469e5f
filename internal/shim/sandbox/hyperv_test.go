package sandbox

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/protocols/stats"
)

// steps logs, in order, what the fakes of a Hyper-V pod were asked to do.
type steps struct {
	mu  sync.Mutex
	log []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, step)
}

func (s *steps) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

var testBoot = BootRecord{Image: "registry.k8s.io/pause:3.10.2", Snapshotter: "wcow", View: "runhcs-boot-pod1", Lease: "runhcs-boot-pod1"}

// fakeBoot is a BootImage; it checks that its record is in the bundle before it "makes" it.
type fakeBoot struct {
	steps      *steps
	bundle     string
	acquireErr error
	made       bool
}

func (b *fakeBoot) Acquire(_ context.Context, record func(BootRecord) error) ([]string, error) {
	if err := record(testBoot); err != nil {
		return nil, err
	}
	st, err := readState(b.bundle)
	if err != nil || st == nil || st.Boot == nil || *st.Boot != testBoot {
		return nil, errors.New("acquire before the record is in the bundle")
	}
	if b.acquireErr != nil {
		b.steps.add("acquire failed")
		return nil, b.acquireErr
	}
	b.made = true
	b.steps.add("acquire")
	return []string{`C:\layers\2`, `C:\layers\1`}, nil
}

func (b *fakeBoot) Release(context.Context) error {
	if b.made {
		b.steps.add("release boot")
		b.made = false
	}
	return nil
}

// fakeVM is a PodVM that can crash.
type fakeVM struct {
	steps *steps
	once  sync.Once
	exit  chan struct{}
}

func (v *fakeVM) end() { v.once.Do(func() { close(v.exit) }) }
func (v *fakeVM) Terminate(context.Context) error {
	v.steps.add("terminate vm")
	v.end()
	return nil
}
func (v *fakeVM) Exited() <-chan struct{} { return v.exit }
func (v *fakeVM) Release(context.Context) error {
	v.steps.add("release vm")
	return nil
}
func (v *fakeVM) Statistics(context.Context) (*stats.Statistics, error) {
	return &stats.Statistics{Vm: &stats.VirtualMachineStatistics{Memory: &stats.VirtualMachineMemoryStatistics{WorkingSetBytes: 1 << 20}}}, nil
}

// hyperVSandbox is a created Hyper-V sandbox over fakes; vms are the VMs it made.
type hyperVSandbox struct {
	*Sandbox
	bundle string
	steps  *steps
	boot   *fakeBoot
	vmErr  error
	vms    []*fakeVM
}

func newHyperVSandbox(t *testing.T) *hyperVSandbox {
	t.Helper()
	h := &hyperVSandbox{bundle: t.TempDir(), steps: &steps{}}
	h.boot = &fakeBoot{steps: h.steps, bundle: h.bundle}
	pod, err := NewHyperVPod(h.bundle, h.boot, func(_ context.Context, parents []string) (PodVM, error) {
		if !reflect.DeepEqual(parents, []string{`C:\layers\2`, `C:\layers\1`}) {
			t.Errorf("VM made from %v, want the boot image's layers", parents)
		}
		if h.vmErr != nil {
			h.steps.add("make vm failed")
			return nil, h.vmErr
		}
		h.steps.add("make vm")
		vm := &fakeVM{steps: h.steps, exit: make(chan struct{})}
		h.vms = append(h.vms, vm)
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.Sandbox, err = Create(context.Background(), Config{ID: "pod1", Bundle: h.bundle, Kind: KindHyperV, NetNS: testNetNS, Pod: pod}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hyperVSandbox) wantSteps(t *testing.T, want ...string) {
	t.Helper()
	if got := h.steps.get(); !reflect.DeepEqual(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
}

func (h *hyperVSandbox) wantState(t *testing.T, want string) {
	t.Helper()
	h.mu.Lock()
	got := h.state.String()
	h.mu.Unlock()
	if got != want {
		t.Fatalf("state %s, want %s", got, want)
	}
}

// Each state of a Hyper-V sandbox, from created to shut down: the VM exists only between
// Start and Shutdown, is released before its boot image, and the bundle state goes last.
func TestHyperVLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newHyperVSandbox(t)

	// created: nothing made, no container may join, no statistics.
	h.wantState(t, "created")
	h.wantSteps(t)
	wantKind(t, h.Join("c1"), errdefs.IsFailedPrecondition, "not ready")
	if _, err := h.Metrics(ctx); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Metrics of a created sandbox: %v", err)
	}

	// ready: the boot image's view, then the VM.
	if _, _, err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantState(t, "ready")
	h.wantSteps(t, "acquire", "make vm")
	if st := h.Status(); st.State != StateReady || st.Kind != KindHyperV {
		t.Fatalf("Status: %+v", st)
	}
	if err := h.Join("c1"); err != nil {
		t.Fatalf("Join a ready sandbox: %v", err)
	}
	m, err := h.Metrics(ctx)
	if err != nil || m.GetVm().GetMemory().GetWorkingSetBytes() != 1<<20 {
		t.Fatalf("Metrics: %v %v; want the VM's", m, err)
	}
	if _, _, err := h.Start(ctx); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("second Start: %v", err)
	}

	// stopped: the VM terminated, Wait returns 0 (a stop, not a crash).
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantState(t, "stopped")
	if status, at, err := h.Wait(ctx); err != nil || status != 0 || at.IsZero() {
		t.Fatalf("Wait: %d %v %v", status, at, err)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	h.wantSteps(t, "acquire", "make vm", "terminate vm")
	if !IsBundle(h.bundle) {
		t.Fatal("a stopped sandbox lost its state")
	}

	// shut down: the VM removed, then the view and lease; then the state.
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantState(t, "shut down")
	h.wantSteps(t, "acquire", "make vm", "terminate vm", "release vm", "release boot")
	if IsBundle(h.bundle) {
		t.Fatal("Shutdown left the sandbox state")
	}
	if err := h.Shutdown(ctx); !errdefs.IsNotFound(err) {
		t.Fatalf("second Shutdown: %v", err)
	}
}

// A VM that crashes ends the sandbox: Wait returns the crash status, containers may no longer
// join, and Shutdown releases without terminating again.
func TestHyperVVMCrash(t *testing.T) {
	ctx := context.Background()
	h := newHyperVSandbox(t)
	if _, _, err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.vms[0].end()
	status, _, err := h.Wait(ctx)
	if err != nil || status != vmCrashStatus {
		t.Fatalf("Wait after a VM crash: %d %v; want %d", status, err, vmCrashStatus)
	}
	h.wantState(t, "stopped")
	if st := h.Status(); st.State != StateNotReady || st.ExitedAt.IsZero() {
		t.Fatalf("Status after a VM crash: %+v", st)
	}
	wantKind(t, h.Join("c1"), errdefs.IsFailedPrecondition, "not ready")
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantSteps(t, "acquire", "make vm", "release vm", "release boot")
}

// A failed start leaves the sandbox created with nothing made (a VM that could not be made
// gives back the boot image's view), and it can be started again.
func TestHyperVStartFailures(t *testing.T) {
	ctx := context.Background()
	h := newHyperVSandbox(t)
	h.boot.acquireErr = errors.New("image not found")
	if _, _, err := h.Start(ctx); err == nil {
		t.Fatal("Start without the boot image succeeded")
	}
	h.wantState(t, "created")
	h.boot.acquireErr = nil
	h.vmErr = errors.New("no boot layer")
	if _, _, err := h.Start(ctx); err == nil {
		t.Fatal("Start without a VM succeeded")
	}
	h.wantState(t, "created")
	h.wantSteps(t, "acquire failed", "acquire", "make vm failed", "release boot")
	h.vmErr = nil
	if _, _, err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantState(t, "ready")
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantSteps(t, "acquire failed", "acquire", "make vm failed", "release boot", "acquire", "make vm", "terminate vm", "release vm", "release boot")
}

// fakeReleaser is the delete action's side of a Hyper-V sandbox.
type fakeReleaser struct {
	steps  *steps
	bundle string
	boots  []BootRecord
}

func (r *fakeReleaser) ReleaseVM(_ context.Context, bundle string) error {
	if bundle != r.bundle {
		return errors.New("wrong bundle " + bundle)
	}
	r.steps.add("cleanup vm")
	return nil
}

func (r *fakeReleaser) ReleaseBoot(_ context.Context, b BootRecord) error {
	r.boots = append(r.boots, b)
	r.steps.add("cleanup boot")
	return nil
}

// After a killed shim, the delete action ends the VM and removes the recorded view and lease,
// then the state; once done, it does nothing. Without a releaser it refuses and keeps the state.
func TestHyperVCleanupAfterKilledShim(t *testing.T) {
	ctx := context.Background()
	h := newHyperVSandbox(t)
	if _, _, err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The shim is killed here.
	_, err := Cleanup(ctx, h.bundle, nil)
	wantKind(t, err, errdefs.IsNotImplemented, "Hyper-V")
	if !IsBundle(h.bundle) {
		t.Fatal("a refused Cleanup removed the state")
	}
	r := &fakeReleaser{steps: h.steps, bundle: h.bundle}
	pid, err := Cleanup(ctx, h.bundle, r)
	if err != nil || pid == 0 {
		t.Fatalf("Cleanup: %d %v", pid, err)
	}
	h.wantSteps(t, "acquire", "make vm", "cleanup vm", "cleanup boot")
	if !reflect.DeepEqual(r.boots, []BootRecord{testBoot}) {
		t.Fatalf("released %+v, want the recorded %+v", r.boots, testBoot)
	}
	if IsBundle(h.bundle) {
		t.Fatal("Cleanup left the sandbox state")
	}
	if pid, err := Cleanup(ctx, h.bundle, r); err != nil || pid != 0 {
		t.Fatalf("second Cleanup: %d %v", pid, err)
	}
}

// Killed before the boot image was recorded: only the VM's record is looked at.
func TestHyperVCleanupBeforeStart(t *testing.T) {
	h := newHyperVSandbox(t)
	r := &fakeReleaser{steps: h.steps, bundle: h.bundle}
	if _, err := Cleanup(context.Background(), h.bundle, r); err != nil {
		t.Fatal(err)
	}
	h.wantSteps(t, "cleanup vm")
}
