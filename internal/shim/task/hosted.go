package task

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/uvm"
)

// Containers in a utility VM (hcsshim's model, cmd/containerd-shim-runhcs-v1/pod.go and
// task_hcs.go): a Hyper-V pod's workload containers are hosted in the pod's VM
// (HostedContainer), which they borrow from the pod and never stop; a Hyper-V task outside a
// pod is a container hosted in a VM of its own (Standalone), which it stops last when it is
// released. The VM itself is the pod's sandbox (vmsandbox.go).

// HostedContainer is a container of a Hyper-V pod, hosted in the pod's utility VM: its layers,
// scratch, mounts and pipes are borrowed from the VM and given back in reverse order when it
// is released; the VM's exit ends it.
type HostedContainer struct {
	systemTask
	vm *uvm.VM
}

// CreateHosted creates and starts the container c in the pod's utility VM vm, its scratch disk
// scratchDisk attached over SCSI. The container has its pod's network (the VM's NICs): an
// endpoint list of its own is refused. On failure nothing is left, and the VM runs on.
func CreateHosted(ctx context.Context, deps Deps, vm *uvm.VM, c Config, scratchDisk string) (_ *HostedContainer, retErr error) {
	if len(c.Endpoints) > 0 {
		// A container of a Hyper-V pod has its pod's network: the NICs of the pod's VM.
		return nil, fmt.Errorf("task %s: windows.network.endpointList without a namespace in a Hyper-V pod: its containers share the pod's network (the sandbox's namespace, the VM's NICs): %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	var acquired resources
	defer undoCreate(ctx, deps, c.ID, &acquired, &retErr)
	// Recorded before anything exists; the layers are shared into the VM, not mounted on the
	// host: they go with it.
	state := &bundleState{SystemID: c.ID}
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	acquired.bundle = c.Bundle
	sys, err := createHosted(ctx, deps, vm, c, scratchDisk, state, &acquired)
	if err != nil {
		return nil, err
	}
	if err := startHosted(ctx, vm, c.ID, sys, &acquired); err != nil {
		return nil, err
	}
	t := &HostedContainer{systemTask: newSystemTask(deps, c, sys, acquired), vm: vm}
	t.setInit(t, c)
	go t.endCreated(deps.Ctx, vm.Exited())
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": vm.ID()}).Info("compute system created in the utility VM")
	return t, nil
}

// startHosted starts the hosted compute system sys, which from then on is the task's to
// release.
func startHosted(ctx context.Context, vm *uvm.VM, id string, sys System, acquired *resources) error {
	acquired.sys, acquired.systemID = sys, id
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	if err := sys.Start(cctx); err != nil {
		return fmt.Errorf("start compute system %q in utility VM %s: %w", id, vm.ID(), err)
	}
	return nil
}

// Standalone is a Hyper-V isolated task outside a pod: a container hosted in a utility VM of
// its own, booted from its own image, as hcsshim's newHcsStandaloneTask does (task_hcs.go).
// The task owns the VM and its network: the VM is stopped last when the task is released, and
// a crash of the VM ends the task like any hosted container's.
type Standalone struct {
	systemTask
	vm *uvm.VM
}

// CreateStandalone creates the VM of vmOpts and the container c in it. On failure nothing is
// left.
func CreateStandalone(ctx context.Context, deps Deps, vmOpts *uvm.Options, c Config, scratchDisk string) (_ *Standalone, retErr error) {
	var acquired resources
	defer undoCreate(ctx, deps, c.ID, &acquired, &retErr)
	// Recorded before the VM exists: the delete action ends it after a crash of the shim.
	state := &bundleState{SystemID: c.ID, VMID: vmOpts.ID}
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	acquired.bundle = c.Bundle

	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	vm, err := uvm.Create(cctx, &uvmHost{h: deps.Host}, vmOpts)
	if err == nil {
		// Stopped after everything the container borrowed from it was given back (release).
		acquired.vm = vm
		err = vm.Start(cctx)
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}

	// Its VM is its own: the task's network goes into it as a pod's does (hcsshim's
	// configureSandboxNetwork for a standalone container in a UVM).
	ns := ""
	if n := c.Document.Container.Networking; n != nil {
		ns = n.Namespace
	}
	made, err := networkVM(ctx, deps, vm, c.Bundle, ns, c.Endpoints, state)
	if made != "" {
		acquired.namespace, acquired.endpoints = made, c.Endpoints
		n := c.Document.Container.Networking
		n.Namespace, n.NetworkAdapters = made, nil
		ns = made
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	if ns != "" {
		acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error { return vm.RemoveNetwork(ctx, ns) }))
	}

	sys, err := createHosted(ctx, deps, vm, c, scratchDisk, state, &acquired)
	if err != nil {
		return nil, err
	}
	if err := startHosted(ctx, vm, c.ID, sys, &acquired); err != nil {
		return nil, err
	}
	t := &Standalone{systemTask: newSystemTask(deps, c, sys, acquired), vm: vm}
	t.setInit(t, c)
	go t.endCreated(deps.Ctx, vm.Exited())
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": vm.ID()}).Info("compute system created in its own utility VM")
	return t, nil
}

// networkVM gives a utility VM its network (uvm.AddNetwork, hcsshim's configureSandboxNetwork
// for a sandbox or a standalone task): the HNS namespace ns, or one made for endpoints, whose
// id it returns (recorded in state first, so that the task's release or the delete action
// removes it after the VM). Nothing to do without either.
func networkVM(ctx context.Context, deps Deps, vm *uvm.VM, bundle, ns string, endpoints []string, state *bundleState) (made string, _ error) {
	if ns == "" && len(endpoints) == 0 {
		return "", nil
	}
	if deps.HNS == nil {
		return "", fmt.Errorf("windows.network: no HNS to network the utility VM with: %w", errdefs.ErrNotImplemented)
	}
	if ns == "" {
		id, err := createNamespace(ctx, deps.HNS, endpoints, func(id string) error {
			state.Namespace, state.Endpoints = id, endpoints
			return writeState(bundle, state)
		})
		if err != nil {
			return "", err
		}
		made, ns = id, id
	}
	h, err := deps.HNS()
	if err != nil {
		return made, err
	}
	return made, vm.AddNetwork(ctx, h, ns)
}

// createHosted creates the compute system of c in vm: its layers are shared into the VM (one
// reference-counted VSMB share per read-only layer), its scratch attached over SCSI and the
// layers combined in the guest; its mounts become VSMB shares and its pipes mapped pipes; the
// document is a HostedSystem naming the VM (hcsshim's internal/uvm/create.go CreateContainer,
// the HCS-mediated path). What it borrows from the VM goes into acquired.vmRelease, given back
// in reverse order when the task is released; the VM is left running.
func createHosted(ctx context.Context, deps Deps, vm *uvm.VM, c Config, scratchDisk string, state *bundleState, acquired *resources) (System, error) {
	if c.CredentialSpec != "" {
		if err := addHostedCCG(ctx, deps, c, vm, state, acquired); err != nil {
			return nil, err
		}
	}
	st, err := vm.MountLayers(ctx, c.Chain.Parents, scratchDisk)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	acquired.vmRelease = append(acquired.vmRelease, releaseOnce(st.Release))
	ctr := c.Document.Container
	ctr.Storage.Path, ctr.Storage.Layers = st.Path, st.Layers
	for i := range ctr.MappedDirectories {
		md := &ctr.MappedDirectories[i]
		fi, err := os.Stat(md.HostPath)
		if err != nil {
			return nil, fmt.Errorf("task %s: mount source %q: %v: %w", c.ID, md.HostPath, err, errdefs.ErrInvalidArgument)
		}
		var share *uvm.Share
		if fi.IsDir() {
			share, err = vm.AddShare(ctx, md.HostPath, md.ReadOnly, false)
		} else {
			share, err = vm.AddFile(ctx, md.HostPath, md.ReadOnly)
		}
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", c.ID, err)
		}
		acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error { return vm.ReleaseShare(ctx, share) }))
		md.HostPath = share.GuestPath
	}
	for i := range ctr.MappedPipes {
		mp := &ctr.MappedPipes[i]
		hostPipe := mp.HostPath
		guest, err := vm.AddPipe(ctx, hostPipe)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", c.ID, err)
		}
		acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error { return vm.ReleasePipe(ctx, hostPipe) }))
		mp.HostPath = guest
	}
	// A container cannot have more processors than its VM (hcsshim's hcsdoc_wcow.go clamps).
	if p := ctr.Processor; p != nil && p.Count > vm.Options().ProcessorCount {
		p.Count = vm.Options().ProcessorCount
	}
	doc := &schema2.ComputeSystem{
		Owner:                             c.Document.Owner,
		SchemaVersion:                     &schema2.SchemaV21,
		HostingSystemId:                   vm.ID(),
		ShouldTerminateOnLastHandleClosed: true,
		HostedSystem:                      &schema2.HostedSystem{SchemaVersion: &schema2.SchemaV21, Container: ctr},
	}
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	sys, err := deps.Host.CreateComputeSystem(cctx, c.ID, doc)
	if err != nil {
		return nil, fmt.Errorf("create compute system %q in utility VM %s: %w", c.ID, vm.ID(), err)
	}
	return &hostedSystem{System: sys, vm: vm}, nil
}

// uvmHost binds uvm.Host to the task's Host, and keeps the System it made (the VM's, on which
// diagnostic processes are created: VMSandbox.ExecInVM).
type uvmHost struct {
	h   Host
	sys System
}

func (u *uvmHost) CreateComputeSystem(ctx context.Context, id string, document any) (uvm.System, error) {
	sys, err := u.h.CreateComputeSystem(ctx, id, document)
	if err != nil {
		return nil, err
	}
	u.sys = sys
	return sys, nil
}

// hostedSystem is a hosted container's compute system, which also ends when its VM does: HCS
// reports the VM's exit to its hosted systems, and if that report is lost the VM's own exit
// still ends the container's processes (docs/architecture.md, "Robustness rules": when a
// utility VM dies, every task in it gets one TaskExit).
type hostedSystem struct {
	System
	vm *uvm.VM

	once   sync.Once
	exited chan struct{}
}

func (h *hostedSystem) Exited() <-chan struct{} {
	h.once.Do(func() {
		h.exited = make(chan struct{})
		go func() {
			select {
			case <-h.System.Exited():
			case <-h.vm.Exited():
			}
			close(h.exited)
		}()
	})
	return h.exited
}

// releaseOnce makes a release function that gives back its resource at most once, so that a
// retried release (Delete after a failed one) does not drop a reference twice.
func releaseOnce(f func(context.Context) error) func(context.Context) error {
	var mu sync.Mutex
	done := false
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil
		}
		if err := f(ctx); err != nil {
			return err
		}
		done = true
		return nil
	}
}
