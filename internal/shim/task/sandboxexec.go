package task

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/uvm"
)

// Execs in a Hyper-V pod's sandbox. containerd's CRI execs in a pod's sandbox container for its
// own purposes: containerd 1.7's PortForward on Windows runs `wincat.exe 127.0.0.1 PORT` there
// (pkg/cri/server/sandbox_portforward_windows.go), wincat.exe being a file of the Windows pause
// image. A process-isolated pod's sandbox is the pause container, so that works as it is. A
// Hyper-V pod's sandbox task is its utility VM, which runs no container (hcsshim's
// wcowPodSandboxTask, whose CreateExec answers "WCOW Pod task should never issue exec", so
// port-forward into such a pod fails on containerd 1.7 with hcsshim). Here an exec in it runs in
// the sandbox's own container instead: the sandbox's image and spec (the pause image and
// command), hosted in the pod's VM as a pod's other containers are (createHosted: its layers
// shared into the VM, its scratch attached, a HostedSystem document naming the VM), so it shares
// the pod's network (the VM's) and sees the pause image's files. That is how hcsshim ran Hyper-V
// pods before it stopped making their pause container (microsoft/hcsshim#517: a Hyper-V pod's
// network compartment is held open without one), and it is made only with the calls the pod's
// containers use. The container is made at the first exec, not with the pod, so a pod that
// nobody execs in costs nothing more. It runs the sandbox's own process (the pause image's
// command, which waits) with no stdio, as a process-isolated pod's pause container does: HCS
// ends a container with its last process, so without it the container would stop after the
// first exec (hcsshim keeps its pause containers alive the same way, pod.go). If it stopped
// anyway, the next exec makes it again. It is released before the VM when the sandbox is
// deleted; after a crash of the shim, the delete action's termination of the VM ends it.

// sandboxContainer is a Hyper-V sandbox's container for execs, made on demand.
type sandboxContainer struct {
	cfg         Config // its document, layers and process
	scratchDisk string
	vm          *uvm.VM // the pod's

	mu       sync.Mutex
	creating chan struct{} // closed when the create in flight ended
	sys      System        // nil until made
	init     HCSProcess    // its own process, which keeps it running
	res      resources     // what it holds in the VM, released with it
	released bool          // the sandbox was deleted: no more execs
}

// sandboxSystem returns the compute system an exec of the sandbox task runs in: the sandbox's
// container, made now if it is not yet. Concurrent first execs wait for one create.
func (t *VMSandbox) sandboxSystem(ctx context.Context) (System, error) {
	sc := t.ctr
	for {
		sc.mu.Lock()
		switch {
		case sc.released:
			sc.mu.Unlock()
			return nil, fmt.Errorf("exec in task %s: the sandbox is deleted: %w", t.id, errdefs.ErrFailedPrecondition)
		case sc.sys != nil && !stopped(sc.sys):
			sys := sc.sys
			sc.mu.Unlock()
			return sys, nil
		case sc.creating == nil:
			sc.creating = make(chan struct{})
			stale, staleInit, staleRes := sc.sys, sc.init, sc.res
			sc.sys, sc.init, sc.res = nil, nil, resources{}
			sc.mu.Unlock()
			if stale != nil {
				// It stopped (its process ended): what it held goes, and a new one is made.
				t.releaseContainer(ctx, staleInit, staleRes)
			}
			sys, init, res, err := createSandboxContainer(ctx, t.deps, sc)
			sc.mu.Lock()
			close(sc.creating)
			sc.creating = nil
			late := err == nil && sc.released
			if err == nil && !late {
				sc.sys, sc.init, sc.res = sys, init, res
			}
			sc.mu.Unlock()
			if late {
				// The sandbox was deleted meanwhile: the container goes at once.
				t.releaseContainer(ctx, init, res)
				return nil, fmt.Errorf("exec in task %s: the sandbox is deleted: %w", t.id, errdefs.ErrFailedPrecondition)
			}
			return sys, err
		}
		wait := sc.creating
		sc.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("exec in task %s: waiting for the sandbox's container: %w", t.id, ctx.Err())
		}
	}
}

// createSandboxContainer creates and starts the sandbox's container in its VM; on failure it
// releases what it acquired.
func createSandboxContainer(ctx context.Context, deps Deps, sc *sandboxContainer) (System, HCSProcess, resources, error) {
	c := sc.cfg
	// createHosted fills in the document (storage, guest paths): a failed attempt must leave
	// the next one the original.
	doc, err := cloneDocument(c.Document)
	if err != nil {
		return nil, nil, resources{}, fmt.Errorf("the sandbox's container for execs: %w", err)
	}
	c.Document = doc
	var acquired resources
	var init HCSProcess
	sys, err := createHosted(ctx, deps, sc.vm, c, sc.scratchDisk, &bundleState{SystemID: c.ID}, &acquired)
	if err == nil {
		acquired.sys, acquired.systemID = sys, c.ID
		err = startSandboxContainer(ctx, sys, sc.vm, c, &init)
	}
	if err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deps.callTimeout())
		defer cancel()
		if rerr := release(uctx, deps, acquired); rerr != nil {
			log.G(ctx).WithError(rerr).WithField("task", c.ID).Error("undo failed create of the sandbox's container")
		}
		if init != nil {
			_ = init.Close()
		}
		return nil, nil, resources{}, fmt.Errorf("the sandbox's container for execs: %w", err)
	}
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": sc.vm.ID(), "pid": init.Pid()}).Info("sandbox container created in the utility VM for execs")
	return sys, init, acquired, nil
}

// startSandboxContainer starts the container and its own process, without stdio.
func startSandboxContainer(ctx context.Context, sys System, vm *uvm.VM, c Config, init *HCSProcess) error {
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	if err := sys.Start(cctx); err != nil {
		return fmt.Errorf("start compute system %q in utility VM %s: %w", c.ID, vm.ID(), err)
	}
	params, err := oci.ProcessParameters(c.Process, oci.Stdio{})
	if err != nil {
		return err
	}
	hp, err := sys.CreateProcess(cctx, params)
	if err != nil {
		return fmt.Errorf("create the sandbox's process in compute system %q: %w", c.ID, err)
	}
	*init = hp
	return nil
}

// releaseContainer releases a sandbox container that is no longer used, logging a failure (the
// VM's end takes what is left).
func (t *VMSandbox) releaseContainer(ctx context.Context, init HCSProcess, res resources) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.deps.callTimeout())
	defer cancel()
	if err := release(rctx, t.deps, res); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("release the sandbox's container")
	}
	if init != nil {
		_ = init.Close()
	}
}

// stopped says whether sys has exited: for a hosted container, its own system or its VM
// (asked directly, not through hostedSystem.Exited's watcher, which may not have seen it yet).
func stopped(sys System) bool {
	if h, ok := sys.(*hostedSystem); ok {
		return closed(h.System.Exited()) || closed(h.vm.Exited())
	}
	return closed(sys.Exited())
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// releaseSandboxContainer ends the sandbox's container, if one was made, and gives back what
// it holds in the VM; no exec can make another afterwards. It is idempotent.
func (t *VMSandbox) releaseSandboxContainer(ctx context.Context) error {
	sc := t.ctr
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	sc.released = true
	res, init, made := sc.res, sc.init, sc.sys != nil
	sc.mu.Unlock()
	if !made {
		return nil
	}
	if err := release(ctx, t.deps, res); err != nil {
		return fmt.Errorf("the sandbox's container %q: %w", res.systemID, err)
	}
	sc.mu.Lock()
	sc.sys, sc.init = nil, nil
	sc.mu.Unlock()
	if init != nil {
		_ = init.Close()
	}
	return nil
}

// cloneDocument is a deep copy of a compute system document (through its JSON form, which is
// all there is to it).
func cloneDocument(doc *schema2.ComputeSystem) (*schema2.ComputeSystem, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var out schema2.ComputeSystem
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
