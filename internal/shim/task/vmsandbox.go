package task

import (
	"context"
	"fmt"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/uvm"
	"github.com/openhcs/runhcs/protocols/stats"
)

// A Hyper-V pod's sandbox task (hcsshim's model, task_wcow_podsandbox.go) is not a container
// but the pod's utility VM: its init is the VM's life (sandboxInit: pid 0, running from Start
// until the VM stops; a kill stops the VM), its statistics the VM's, its Update a resize of the VM. Unlike
// hcsshim's, it takes execs: they run in its own container in the VM (sandboxexec.go).

// SandboxConfig is a Hyper-V pod's sandbox task to create: its utility VM.
type SandboxConfig struct {
	ID, Bundle string
	VM         *uvm.Options
	IO         stdio.Config
	// NetworkNamespace is the pod's HNS namespace (spec.windows.network.networkNamespace):
	// added to the VM with its endpoints as NICs once it runs. Endpoints, when set instead
	// (an endpoint list without a namespace), go into a namespace the task makes first.
	NetworkNamespace string
	Endpoints        []string
	// Container, when set, is the sandbox's own container (its image and spec, hosted in the
	// VM with ScratchDisk), which its execs run in, made at the first (sandboxexec.go).
	// Without it the sandbox refuses execs, as hcsshim's does.
	Container   *Config
	ScratchDisk string
}

// VMSandbox is a Hyper-V pod's sandbox task: the pod's utility VM, which it owns (it stops it
// when killed or deleted), and the HNS namespace it made for the pod's endpoint list, if any.
type VMSandbox struct {
	base
	vm *uvm.VM
	// vmSys is the VM's compute system, on which ExecInVM creates processes.
	vmSys System
	res   resources // the VM, the namespace it made, the bundle state
	// ctr is the sandbox's container for execs (sandboxexec.go), nil if it takes none.
	ctr *sandboxContainer
}

// CreateVMSandbox creates and starts the pod's utility VM and returns the sandbox task that
// owns it. On failure nothing is left: the VM is terminated and the state removed.
func CreateVMSandbox(ctx context.Context, deps Deps, c SandboxConfig) (_ *VMSandbox, retErr error) {
	var acquired resources
	defer undoCreate(ctx, deps, c.ID, &acquired, &retErr)
	// Recorded before the VM exists, so the delete action can end it after a crash.
	state := &bundleState{SystemID: c.VM.ID}
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	acquired.bundle = c.Bundle
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	uh := &uvmHost{h: deps.Host}
	vm, err := uvm.Create(cctx, uh, c.VM)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	acquired.vm = vm
	if err := vm.Start(cctx); err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	made, err := networkVM(cctx, deps, vm, c.Bundle, c.NetworkNamespace, c.Endpoints, state)
	if made != "" {
		acquired.namespace, acquired.endpoints = made, c.Endpoints
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	t := &VMSandbox{base: newBase(deps, c.ID, c.Bundle), vm: vm, vmSys: uh.sys, res: acquired}
	t.init = newSandboxInit(deps, c.ID, c.IO, sandboxLife{
		what:  "the sandbox of a Hyper-V pod",
		ended: vm.Exited(),
		stop:  vm.Terminate,
		after: t.afterInitExit,
	})
	if c.Container != nil {
		t.ctr = &sandboxContainer{cfg: *c.Container, scratchDisk: c.ScratchDisk, vm: vm}
	}
	go t.endCreated(deps.Ctx, vm.Exited())
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": vm.ID()}).Info("utility VM created for the pod")
	return t, nil
}

// VM is the pod's utility VM, which the sandbox owns and the pod's containers borrow from.
func (t *VMSandbox) VM() *uvm.VM { return t.vm }

// processSystem is where the sandbox's execs run: its container in the VM, made at the first.
func (t *VMSandbox) processSystem(ctx context.Context, _ string) (System, error) {
	return t.sandboxSystem(ctx)
}

func (t *VMSandbox) systemExited() <-chan struct{} { return t.vm.Exited() }

// afterInitExit runs when the VM's life ended (killed, or the VM stopped by itself), before its
// exit is published: the execs are killed (their container is in the VM) and the VM stopped.
func (t *VMSandbox) afterInitExit(ctx context.Context) {
	t.killExecs(ctx)
	tctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
	defer cancel()
	if err := t.vm.Terminate(tctx); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("terminate the utility VM after the sandbox's end")
	}
}

// Exec adds an exec, which runs in the sandbox's container in the VM (sandboxexec.go).
func (t *VMSandbox) Exec(execID string, spec *specs.Process, io stdio.Config) error {
	if t.ctr == nil {
		// Made without its container: as hcsshim's wcowPodSandboxTask.CreateExec.
		return fmt.Errorf("exec %q in task %s: the sandbox of a Hyper-V pod is its utility VM, not a container (use shimdiag exec): %w", execID, t.id, errdefs.ErrNotImplemented)
	}
	return t.addExec(t, execID, spec, io)
}

// Start starts the sandbox (the VM already runs) or an exec.
func (t *VMSandbox) Start(ctx context.Context, execID string) (uint32, error) {
	return t.start(ctx, execID, t.afterInitExit)
}

// Pause is not supported for a Hyper-V pod's sandbox.
func (t *VMSandbox) Pause(ctx context.Context) error {
	return fmt.Errorf("pause compute system %q: pause the utility VM %s: pausing a Hyper-V pod's sandbox is not supported: %w", t.id, t.vm.ID(), errdefs.ErrNotImplemented)
}

// Resume is not supported for a Hyper-V pod's sandbox.
func (t *VMSandbox) Resume(ctx context.Context) error {
	return fmt.Errorf("resume compute system %q: resume the utility VM %s: %w", t.id, t.vm.ID(), errdefs.ErrNotImplemented)
}

// Delete deletes an exec or the sandbox: its container for execs goes first, then the VM,
// then the namespace it made and its state.
func (t *VMSandbox) Delete(ctx context.Context, execID string) (Status, error) {
	return t.delete(ctx, execID, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, t.deps.callTimeout())
		defer cancel()
		if err := t.releaseSandboxContainer(cctx); err != nil {
			return err
		}
		return release(cctx, t.deps, t.res)
	})
}

// Pids lists the processes of the VM itself (hcsshim's sandbox task lists its VM's).
func (t *VMSandbox) Pids(ctx context.Context) ([]*tasktypes.ProcessInfo, error) {
	return processList(ctx, &t.base, t.vm.Properties)
}

// Update is the sandbox's resize: the pod's resources resize its VM, as hcsshim's
// internal/uvm/update_uvm.go does (memory.limit in bytes → SizeInMB; cpu.maximum → Limit and
// cpu.shares → Weight, passed through).
func (t *VMSandbox) Update(ctx context.Context, res *specs.WindowsResources) error {
	var mb uint64
	if res.Memory != nil && res.Memory.Limit != nil {
		mb = *res.Memory.Limit >> 20
		if mb == 0 {
			return fmt.Errorf("update task %s: memory.limit=%d: less than 1 MB for the utility VM: %w", t.id, *res.Memory.Limit, errdefs.ErrInvalidArgument)
		}
	}
	var limits *schema2.ProcessorLimits
	if c := res.CPU; c != nil && (c.Maximum != nil || c.Shares != nil) {
		limits = &schema2.ProcessorLimits{}
		if c.Maximum != nil {
			limits.Limit = uint64(*c.Maximum)
		}
		if c.Shares != nil {
			limits.Weight = uint64(*c.Shares)
		}
	}
	if mb == 0 && limits == nil {
		return fmt.Errorf("update task %s: neither memory.limit nor cpu.maximum/shares for the utility VM: %w", t.id, errdefs.ErrInvalidArgument)
	}
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	if err := t.vm.Resize(cctx, mb, limits); err != nil {
		return fmt.Errorf("update task %s: %w", t.id, err)
	}
	return nil
}

// Stats reports the utility VM only (hcsshim's task_wcow_podsandbox.go Stats, which adds the
// "vm" part only for the task that owns the VM): the sandbox is no container.
func (t *VMSandbox) Stats(ctx context.Context) (*stats.Statistics, error) {
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	vm, err := t.vm.Stats(cctx)
	if err != nil {
		return nil, err
	}
	return &stats.Statistics{Vm: vm}, nil
}

// ExecInVM runs a process in the utility VM itself, in no container (shimdiag exec; hcsshim's
// ExecInUvm, which HCS serves through the VM's guest connection), with its stdio relayed to
// io, and returns its exit code once it exited and its output was drained. If ctx ends first
// the process is killed.
func (t *VMSandbox) ExecInVM(ctx context.Context, args []string, workdir string, io stdio.Config) (int, error) {
	if len(args) == 0 {
		return 0, fmt.Errorf("exec in utility VM %s: args: empty: %w", t.vm.ID(), errdefs.ErrInvalidArgument)
	}
	params, err := oci.ProcessParameters(&specs.Process{Args: args, Cwd: workdir, Terminal: io.Terminal},
		oci.Stdio{Stdin: io.Stdin != "", Stdout: io.Stdout != "", Stderr: io.Stderr != "" || io.Stdout != ""})
	if err != nil {
		return 0, fmt.Errorf("exec in utility VM %s: %w", t.vm.ID(), err)
	}
	id := "diag-exec"
	up, err := stdio.Open(ctx, t.deps.Namespace, id, io)
	if err != nil {
		return 0, fmt.Errorf("exec in utility VM %s: stdio: %w", t.vm.ID(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	hp, err := t.vmSys.CreateProcess(cctx, params)
	cancel()
	if err != nil {
		_ = up.Close()
		return 0, fmt.Errorf("exec %q in utility VM %s: %w", args[0], t.vm.ID(), err)
	}
	defer hp.Close()
	in, out, errw := hp.Stdio()
	relay := stdio.NewRelay(ctx, up, stdio.Process{Stdin: in, Stdout: out, Stderr: errw})
	defer relay.Close()
	select {
	case <-hp.Exited():
	case <-t.vm.Exited():
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HCSCallTimeout)
		_, _ = hp.Kill(kctx)
		cancel()
		relay.Abort()
		return 0, fmt.Errorf("exec %q in utility VM %s: %w", args[0], t.vm.ID(), ctx.Err())
	}
	select {
	case <-relay.Drained():
	case <-time.After(drainTimeout):
		relay.Abort()
	}
	code, err := hp.ExitCode()
	if err != nil {
		return exitCodeUnknown, fmt.Errorf("exec %q in utility VM %s: exit code: %w", args[0], t.vm.ID(), err)
	}
	return code, nil
}

// ShareInVM shares the host folder hostPath into the utility VM at guestPath (shimdiag share;
// hcsshim's uvm.Share). The share lasts as long as the VM.
func (t *VMSandbox) ShareInVM(ctx context.Context, hostPath, guestPath string, readOnly bool) error {
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	return t.vm.Share(cctx, hostPath, guestPath, readOnly)
}
