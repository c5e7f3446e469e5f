package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/protocols/stats"
)

// KindHyperV is the bundle-state kind of a Hyper-V isolated sandbox: the pod's utility VM.
const KindHyperV = "hyperv"

// vmCrashStatus is the exit status of a Hyper-V sandbox whose VM ended by itself (a crash):
// hcsshim force-exits a pod sandbox's init with 1 when its host exits
// (cmd/containerd-shim-runhcs-v1/exec_wcow_podsandbox.go), as internal/shim/task's sandboxInit
// does for the pause-container path.
const vmCrashStatus = 1

// HyperVPod is the pod of a Hyper-V isolated sandbox: its utility VM (<pod id>@vm), which its
// containers are hosted in. With the sandbox API there is no pause container, so no rootfs
// reaches the shim; the VM boots from the base layer of an image the shim is told of (the
// handler's sandbox_image, which containerd's CRI pulls and unpacks before StartSandbox):
// Start first acquires that image's layers (BootImage), recording what it makes in the
// sandbox's bundle before making it, then makes and starts the VM (VMMaker). Release frees
// the VM first (it holds the boot layer's share), then the image's layers.
type HyperVPod struct {
	bundle string
	boot   BootImage
	newVM  VMMaker

	mu       sync.Mutex
	vm       PodVM // nil until started
	stopping bool  // Stop was called: the VM's end is no crash
	status   uint32
	released bool
	exit     chan struct{}
	once     sync.Once
}

var _ Pod = (*HyperVPod)(nil)

// NewHyperVPod returns the pod of the Hyper-V sandbox whose bundle is bundle: its VM is made
// by newVM from the layers boot gives.
func NewHyperVPod(bundle string, boot BootImage, newVM VMMaker) (*HyperVPod, error) {
	if boot == nil || newVM == nil {
		return nil, fmt.Errorf("hyper-v sandbox in bundle %q: no boot image or VM maker: %w", bundle, errdefs.ErrInvalidArgument)
	}
	return &HyperVPod{bundle: bundle, boot: boot, newVM: newVM, exit: make(chan struct{})}, nil
}

// Start acquires the boot image's layers and makes and starts the VM; on failure what it
// acquired is released. Its pid is the shim's, the process that answers for the pod (the VM
// has no process on the host).
func (p *HyperVPod) Start(ctx context.Context) (uint32, error) {
	parents, err := p.boot.Acquire(ctx, func(r BootRecord) error { return recordBoot(p.bundle, r) })
	if err != nil {
		return 0, p.undoStart(ctx, fmt.Errorf("boot image: %w", err))
	}
	vm, err := p.newVM(ctx, parents)
	if err != nil {
		return 0, p.undoStart(ctx, err)
	}
	p.mu.Lock()
	p.vm = vm
	p.mu.Unlock()
	go p.watch(vm)
	return uint32(os.Getpid()), nil
}

func (p *HyperVPod) undoStart(ctx context.Context, err error) error {
	if rerr := p.boot.Release(context.WithoutCancel(ctx)); rerr != nil {
		return fmt.Errorf("%w (and releasing the boot image: %v)", err, rerr)
	}
	return err
}

// watch records the VM's end: 0 after Stop, vmCrashStatus when it ended by itself.
func (p *HyperVPod) watch(vm PodVM) {
	<-vm.Exited()
	p.mu.Lock()
	if !p.stopping {
		p.status = vmCrashStatus
	}
	p.mu.Unlock()
	p.once.Do(func() { close(p.exit) })
}

// Stop terminates the VM (every container in it ends with it); Exited is closed once it ended.
func (p *HyperVPod) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopping = true
	vm := p.vm
	p.mu.Unlock()
	if vm == nil {
		p.once.Do(func() { close(p.exit) })
		return nil
	}
	if err := vm.Terminate(ctx); err != nil {
		p.mu.Lock()
		p.stopping = false
		p.mu.Unlock()
		return fmt.Errorf("terminate the utility VM: %w", err)
	}
	return nil
}

func (p *HyperVPod) Exited() <-chan struct{} { return p.exit }

func (p *HyperVPod) ExitStatus() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Release removes the VM, then the boot image's layers (the view and its lease). Idempotent;
// a failed Release can be repeated.
func (p *HyperVPod) Release(ctx context.Context) error {
	p.mu.Lock()
	vm, done := p.vm, p.released
	p.mu.Unlock()
	if done {
		return nil
	}
	if vm != nil {
		if err := vm.Release(ctx); err != nil {
			return fmt.Errorf("release the utility VM: %w", err)
		}
	}
	if err := p.boot.Release(ctx); err != nil {
		return fmt.Errorf("release the boot image: %w", err)
	}
	p.mu.Lock()
	p.released = true
	p.mu.Unlock()
	return nil
}

// Statistics of a Hyper-V pod are its VM's (the "vm" part of containerd.runhcs.stats.v1).
func (p *HyperVPod) Statistics(ctx context.Context) (*stats.Statistics, error) {
	p.mu.Lock()
	vm := p.vm
	p.mu.Unlock()
	if vm == nil {
		return nil, fmt.Errorf("statistics: the utility VM is not running: %w", errdefs.ErrFailedPrecondition)
	}
	return vm.Statistics(ctx)
}
