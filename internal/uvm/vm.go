package uvm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// VM is a pod's utility VM and the resources its hosted containers borrow.
type VM struct {
	id   string
	opts Options
	sys  System

	mu    sync.Mutex // guards state only; never held across an HCS call
	state vmState

	shares refs[shareKey, *Share]
	disks  refs[string, *Disk]
	pipes  refs[string, string]
	// networks are HNS namespaces added to the VM with their endpoints as NICs (network.go),
	// by lower-cased namespace id.
	networks refs[string, *network]

	counterMu sync.Mutex // guards the name counters and the LUN table
	nextShare uint64
	nextMount uint64
	luns      [lunsPerController]bool
}

// Create creates the VM's compute system from o (created, not started). On failure nothing
// is left: a system HCS made is terminated and closed.
func Create(ctx context.Context, host Host, o *Options) (*VM, error) {
	sys, err := host.CreateComputeSystem(ctx, o.ID, o.Document())
	if err != nil {
		return nil, fmt.Errorf("create utility VM %s: %w", o.ID, err)
	}
	vm := &VM{id: o.ID, opts: *o, sys: sys, state: createdState{}}
	if o.ScratchDisk != "" {
		vm.luns[0] = true // the VM's own scratch (hcsshim's reservedSCSISlots)
	}
	go vm.watch()
	return vm, nil
}

// watch records the VM's exit, whoever caused it.
func (vm *VM) watch() {
	<-vm.sys.Exited()
	vm.mu.Lock()
	vm.state = vm.state.exited()
	vm.mu.Unlock()
}

// ID is the compute system's id (<pod id>@vm).
func (vm *VM) ID() string { return vm.id }

// Options is what the VM was made of.
func (vm *VM) Options() Options { return vm.opts }

// Exited is closed when the VM stopped, by Terminate or by itself (a crash).
func (vm *VM) Exited() <-chan struct{} { return vm.sys.Exited() }

// State names the VM's state (created, starting, running, stopped, closed).
func (vm *VM) State() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.state.String()
}

func (vm *VM) transition(f func(vmState) (vmState, error)) error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	next, err := f(vm.state)
	if err != nil {
		return fmt.Errorf("utility VM %s: %w", vm.id, err)
	}
	vm.state = next
	return nil
}

// Start starts the VM (HCS waits for its guest connection: the document has one).
func (vm *VM) Start(ctx context.Context) error {
	if err := vm.transition(vmState.start); err != nil {
		return err
	}
	if err := vm.sys.Start(ctx); err != nil {
		_ = vm.transition(vmState.startFailed)
		return fmt.Errorf("start utility VM %s: %w", vm.id, err)
	}
	// An exit meanwhile (a crash during boot) wins: started is refused from stopped.
	if err := vm.transition(vmState.started); err != nil {
		return fmt.Errorf("start utility VM %s: it stopped while starting: %w", vm.id, err)
	}
	log.G(ctx).WithField("system", vm.id).Info("utility VM started")
	return nil
}

// Terminate stops the VM; a VM already gone is not an error (hcsshim's v2/system.go tolerates
// HCS_E_SYSTEM_ALREADY_STOPPED and SYSTEM_NOT_FOUND likewise). Its networks are removed first,
// as hcsshim's pod sandbox tears down networking before it closes the VM; a failure there is
// logged and does not keep the VM running (HCS unplugs the NICs of a VM that stops).
func (vm *VM) Terminate(ctx context.Context) error {
	if err := vm.removeNetworks(ctx); err != nil {
		log.G(ctx).WithError(err).WithField("system", vm.id).Warn("remove the pod network from the utility VM before stopping it")
	}
	if vm.gone() {
		return nil
	}
	if err := vm.sys.Terminate(ctx); err != nil && !hcs.IsGone(err) && !errors.Is(err, hcs.ErrClosed) {
		return fmt.Errorf("terminate utility VM %s: %w", vm.id, err)
	}
	return nil
}

// Close releases the handle (which, with ShouldTerminateOnLastHandleClosed, also ends a VM
// still running).
func (vm *VM) Close() error {
	vm.mu.Lock()
	vm.state = vm.state.close()
	vm.mu.Unlock()
	return vm.sys.Close()
}

// gone says the VM no longer exists for its resources: its releases need no HCS call.
func (vm *VM) gone() bool {
	select {
	case <-vm.sys.Exited():
		return true
	default:
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.state.gone()
}

// add makes a modify request that adds to the VM; it must be running.
func (vm *VM) add(ctx context.Context, req *schema2.ModifySettingRequest) error {
	vm.mu.Lock()
	select {
	case <-vm.sys.Exited(): // the watcher may not have recorded it yet
		vm.state = vm.state.exited()
	default:
	}
	err := vm.state.canModify()
	vm.mu.Unlock()
	if err != nil {
		return fmt.Errorf("utility VM %s: %w", vm.id, err)
	}
	if err := vm.sys.Modify(ctx, req); err != nil {
		return fmt.Errorf("utility VM %s: %s %s: %w", vm.id, req.RequestType, req.ResourcePath, err)
	}
	return nil
}

// remove makes a modify request that removes from the VM; with the VM gone it is done already
// (hcsshim#2743: a release must not fail because the VM exited).
func (vm *VM) remove(ctx context.Context, req *schema2.ModifySettingRequest) error {
	if vm.gone() {
		return nil
	}
	err := vm.sys.Modify(ctx, req)
	if err == nil || hcs.IsGone(err) || errors.Is(err, hcs.ErrClosed) || vm.gone() {
		return nil
	}
	return fmt.Errorf("utility VM %s: %s %s: %w", vm.id, req.RequestType, req.ResourcePath, err)
}

// Modify applies a request to the running VM as it is (memory resize, processor limits): the
// sandbox task's Update.
func (vm *VM) Modify(ctx context.Context, req *schema2.ModifySettingRequest) error {
	return vm.add(ctx, req)
}

// Properties queries the VM.
func (vm *VM) Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error) {
	return vm.sys.Properties(ctx, types...)
}
