package task

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/uvm"
	"github.com/openhcs/runhcs/protocols/stats"
)

// Hyper-V isolated pods (hcsshim's model, cmd/containerd-shim-runhcs-v1/pod.go and
// task_wcow_podsandbox.go): the pod's sandbox task is not a container but its utility VM,
// whose "init process" runs as long as the VM does (pid 0), and whose kill stops the VM; the
// workload tasks are containers hosted in that VM, which they never stop. Unlike hcsshim's, the
// sandbox takes execs: they run in its own container in the VM (sandboxexec.go).

// SandboxConfig is a Hyper-V pod's sandbox task to create: its utility VM.
type SandboxConfig struct {
	ID, Bundle string
	VM         *uvm.Options
	Process    *specs.Process
	IO         stdio.Config
	// NetworkNamespace is the pod's HNS namespace (spec.windows.network.networkNamespace):
	// added to the VM with its endpoints as NICs once it runs. Endpoints, when set instead
	// (an endpoint list without a namespace), go into a namespace the task makes first.
	NetworkNamespace string
	Endpoints        []string
	// Container, when set, is the sandbox's own container (its image and spec, hosted in the
	// VM; Hosted.ScratchDisk set, Hosted.VM filled in here), which its execs run in, made at
	// the first (sandboxexec.go). Without it the sandbox refuses execs, as hcsshim's does.
	Container *Config
}

// CreateSandbox creates and starts the pod's utility VM and returns the sandbox task that owns
// it. On failure nothing is left: the VM is terminated and the state removed.
func CreateSandbox(ctx context.Context, deps Deps, c SandboxConfig) (_ *Task, retErr error) {
	// Recorded before the VM exists, so the delete action can end it after a crash.
	if err := writeState(c.Bundle, &bundleState{SystemID: c.VM.ID}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	defer cancel()
	uh := &uvmHost{h: deps.Host}
	vm, err := uvm.Create(cctx, uh, c.VM)
	if err != nil {
		_ = removeBundleState(c.Bundle)
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	sys := &vmSystem{vm: vm, hcs: uh.sys}
	t := &Task{deps: deps, id: c.ID, bundle: c.Bundle, sys: sys, vm: vm, sandbox: true, execs: map[string]*Process{}}
	defer func() {
		if retErr != nil {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HCSCallTimeout)
			defer cancel()
			// The VM's Terminate removes its network first; then the namespace the task made.
			if err := release(uctx, deps, resources{sys: sys, systemID: vm.ID(), bundle: c.Bundle, namespace: t.netns, endpoints: t.endpoints}); err != nil {
				log.G(ctx).WithError(err).WithField("task", c.ID).Error("undo failed create")
			}
		}
	}()
	if err := vm.Start(cctx); err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	if err := t.networkVM(cctx, c.NetworkNamespace, c.Endpoints, &bundleState{SystemID: c.VM.ID}); err != nil {
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	t.init = newProcess(t, "", c.Process, c.IO)
	if c.Container != nil {
		cc := *c.Container
		hosted := *cc.Hosted
		hosted.VM, hosted.OwnsVM = vm, false
		cc.Hosted = &hosted
		t.sboxCtr = &sandboxContainer{cfg: cc}
	}
	go t.watchVM(deps.Ctx)
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "system": vm.ID()}).Info("utility VM created for the pod")
	return t, nil
}

// networkVM gives the task's utility VM its network (uvm.AddNetwork, hcsshim's
// configureSandboxNetwork for a sandbox or a standalone task): the HNS namespace ns, or one
// the task makes for endpoints (recorded in state, then in t.netns/t.endpoints, so that the
// task's release or the delete action removes it after the VM). Nothing to do without either.
func (t *Task) networkVM(ctx context.Context, ns string, endpoints []string, state *bundleState) error {
	if ns == "" && len(endpoints) == 0 {
		return nil
	}
	if t.deps.HNS == nil {
		return fmt.Errorf("windows.network: no HNS to network the utility VM with: %w", errdefs.ErrNotImplemented)
	}
	if ns == "" {
		made, err := createNamespace(ctx, t.deps.HNS, endpoints, func(id string) error {
			state.Namespace, state.Endpoints = id, endpoints
			return writeState(t.bundle, state)
		})
		if err != nil {
			return err
		}
		t.netns, t.endpoints, ns = made, endpoints, made
	}
	h, err := t.deps.HNS()
	if err != nil {
		return err
	}
	return t.vm.AddNetwork(ctx, h, ns)
}

// VM is the utility VM a sandbox task owns, nil for other tasks.
func (t *Task) VM() *uvm.VM {
	if t.sandbox {
		return t.vm
	}
	return nil
}

// CreateStandalone creates a Hyper-V isolated task outside a pod: a utility VM of its own, booted
// from its own image (vm), with its container hosted in it, as hcsshim's newHcsStandaloneTask
// does (task_hcs.go). The task owns the VM: it is stopped when the task is released (Delete),
// and a crash of the VM ends the task like any hosted container's. On failure nothing is left.
func CreateStandalone(ctx context.Context, deps Deps, vm *uvm.Options, c Config, scratchDisk string) (*Task, error) {
	cctx, cancel := context.WithTimeout(ctx, CreateTimeout)
	// The VM's id is in the task's state only once Create writes it; a crash before that leaves
	// the VM to HCS, which ends it with the shim's handle (ShouldTerminateOnLastHandleClosed).
	v, err := uvm.Create(cctx, &uvmHost{h: deps.Host}, vm)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("task %s: %w", c.ID, err)
	}
	err = v.Start(cctx)
	cancel()
	if err == nil {
		c.Hosted = &HostedConfig{VM: v, ScratchDisk: scratchDisk, OwnsVM: true}
		t, cerr := Create(ctx, deps, c)
		if cerr == nil {
			return t, nil
		}
		err = cerr
	} else {
		err = fmt.Errorf("task %s: %w", c.ID, err)
	}
	// Create released what it made but the VM unless it got as far as owning it; ending a VM
	// twice is fine.
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), HCSCallTimeout)
	defer ucancel()
	if terr := v.Terminate(uctx); terr != nil {
		log.G(ctx).WithError(terr).WithField("task", c.ID).Error("undo failed create: terminate its utility VM")
	}
	_ = v.Close()
	return nil, err
}

// HostedConfig places a workload container in its pod's utility VM.
type HostedConfig struct {
	VM *uvm.VM
	// ScratchDisk is the container's scratch disk, attached over SCSI.
	ScratchDisk string
	// OwnsVM says the task owns the VM (a standalone Hyper-V task, CreateStandalone): it is
	// recorded in the task's state and stopped last when the task is released.
	OwnsVM bool
}

// createHosted is Create for a container hosted in a utility VM: its layers are shared into the
// VM (one reference-counted VSMB share per read-only layer), its scratch attached over SCSI and
// the layers combined in the guest; its mounts become VSMB shares and its pipes mapped pipes;
// the document is a HostedSystem naming the VM (hcsshim's internal/uvm/create.go
// CreateContainer, the HCS-mediated path). The VM's resources are released in reverse order
// when the task is (acquired.vmRelease), and the VM is left running.
func createHosted(ctx context.Context, deps Deps, c Config, state *bundleState, acquired *resources) (System, error) {
	vm := c.Hosted.VM
	if c.Hosted.OwnsVM {
		// First acquired, so released last (release runs vmRelease in reverse).
		acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error {
			if err := vm.Terminate(ctx); err != nil {
				return err
			}
			return vm.Close()
		}))
	}
	if c.Hosted.OwnsVM {
		// Its VM is its own: the task's network goes into it as a pod's does (hcsshim's
		// configureSandboxNetwork for a standalone container in a UVM).
		ns := ""
		if n := c.Document.Container.Networking; n != nil {
			ns = n.Namespace
		}
		t := &Task{deps: deps, id: c.ID, bundle: c.Bundle, vm: vm}
		state := &bundleState{SystemID: c.ID, VMID: vm.ID()}
		err := t.networkVM(ctx, ns, c.Endpoints, state)
		acquired.namespace, acquired.endpoints = t.netns, t.endpoints
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", c.ID, err)
		}
		if t.netns != "" {
			n := c.Document.Container.Networking
			n.Namespace, n.NetworkAdapters = t.netns, nil
			ns = t.netns
		}
		if ns != "" {
			acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error { return vm.RemoveNetwork(ctx, ns) }))
		}
	} else if len(c.Endpoints) > 0 {
		// A container of a Hyper-V pod has its pod's network: the NICs of the pod's VM.
		return nil, fmt.Errorf("task %s: windows.network.endpointList without a namespace in a Hyper-V pod: its containers share the pod's network (the sandbox's namespace, the VM's NICs): %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	if c.CredentialSpec != "" {
		if err := addHostedCCG(ctx, deps, c, vm, state, acquired); err != nil {
			return nil, err
		}
	}
	st, err := vm.MountLayers(ctx, c.Chain.Parents, c.Hosted.ScratchDisk)
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

// watchVM ends, when the pod's VM stops, every process of the task that the VM's exit does not
// end by itself: one never started (created) gets its TaskExit now, as a process killed
// before it ran (hcsshim's waitForHostExit force-exits them likewise). Running processes end
// through their system's exit (hostedSystem.Exited includes the VM's).
func (t *Task) watchVM(ctx context.Context) {
	select {
	case <-t.vm.Exited():
	case <-ctx.Done():
		return
	}
	for _, p := range append(t.Execs(), t.init) {
		if err := p.ask(procState.canDeleteTask); err != nil {
			continue // live: its own watch records the exit
		}
		if p.exited() {
			continue
		}
		// created: ends at once (kill of a created process never reaches HCS).
		if err := p.kill(ctx, sigKILL); err != nil && !errdefs.IsNotFound(err) {
			p.logger(ctx).WithError(err).Debug("end after the utility VM exited")
		}
	}
}

// uvmHost binds uvm.Host to the task's Host, and keeps the System it made (the VM's, on which
// diagnostic processes are created: ExecInVM).
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

// vmSystem is the sandbox task's System: its utility VM. Its one "process" is the VM itself;
// hcs is the VM's compute system, on which ExecInVM creates processes.
type vmSystem struct {
	vm  *uvm.VM
	hcs System
}

func (s *vmSystem) ID() string                          { return s.vm.ID() }
func (s *vmSystem) Start(context.Context) error         { return nil } // started by CreateSandbox
func (s *vmSystem) Terminate(ctx context.Context) error { return s.vm.Terminate(ctx) }
func (s *vmSystem) Pause(context.Context) error {
	return fmt.Errorf("pause the utility VM %s: pausing a Hyper-V pod's sandbox is not supported: %w", s.vm.ID(), errdefs.ErrNotImplemented)
}
func (s *vmSystem) Resume(context.Context) error {
	return fmt.Errorf("resume the utility VM %s: %w", s.vm.ID(), errdefs.ErrNotImplemented)
}
func (s *vmSystem) Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error) {
	return s.vm.Properties(ctx, types...)
}
func (s *vmSystem) Modify(ctx context.Context, req *schema2.ModifySettingRequest) error {
	return s.vm.Modify(ctx, req)
}
func (s *vmSystem) Exited() <-chan struct{} { return s.vm.Exited() }
func (s *vmSystem) Close() error            { return s.vm.Close() }

// CreateProcess starts the sandbox's init "process": nothing runs (there is no pause
// container), and it lasts as long as the VM.
func (s *vmSystem) CreateProcess(context.Context, *schema2.ProcessParameters) (HCSProcess, error) {
	return &vmProcess{vm: s.vm}, nil
}

// vmProcess is the sandbox task's init process: the VM's life. A signal or a kill stops the
// VM (hcsshim's wcowPodSandboxTask: killing the sandbox init closes the host).
type vmProcess struct {
	vm *uvm.VM

	mu     sync.Mutex
	killed bool
}

func (p *vmProcess) Pid() uint32 { return 0 }
func (p *vmProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser) {
	return nil, nil, nil
}
func (p *vmProcess) Signal(ctx context.Context, _ *schema2.SignalProcessOptions) (bool, error) {
	delivered, err := p.Kill(ctx)
	return delivered, err
}
func (p *vmProcess) Kill(ctx context.Context) (bool, error) {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	return true, p.vm.Terminate(ctx)
}
func (p *vmProcess) Exited() <-chan struct{} { return p.vm.Exited() }

// ExitCode is 0 when the sandbox was stopped, 1 when the VM ended by itself (as hcsshim
// force-exits the sandbox init with 1 when its host exits).
func (p *vmProcess) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return 0, nil
	}
	return exitCodeKilledCreated, nil
}
func (p *vmProcess) ResizeConsole(context.Context, uint16, uint16) error {
	return fmt.Errorf("the sandbox of a Hyper-V pod has no console: %w", errdefs.ErrFailedPrecondition)
}
func (p *vmProcess) Close() error { return nil }

// resizeVM is the sandbox task's Update: the pod's resources resize its VM, as hcsshim's
// internal/uvm/update_uvm.go does (memory.limit in bytes → SizeInMB; cpu.maximum → Limit and
// cpu.shares → Weight, passed through).
func (t *Task) resizeVM(ctx context.Context, res *specs.WindowsResources) error {
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

// VMStatistics returns the utility VM's statistics for a sandbox task (the "vm" part of its
// stats, which hcsshim adds only for the task that owns the VM), nil for other tasks.
func (t *Task) VMStatistics(ctx context.Context) (*stats.VirtualMachineStatistics, error) {
	if !t.sandbox {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	return t.vm.Stats(cctx)
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

// ExecInVM runs a process in the sandbox's utility VM itself, in no container (shimdiag exec;
// hcsshim's ExecInUvm, which HCS serves through the VM's guest connection), with its stdio
// relayed to io, and returns its exit code once it exited and its output was drained. If ctx
// ends first the process is killed.
func (t *Task) ExecInVM(ctx context.Context, args []string, workdir string, io stdio.Config) (int, error) {
	if !t.sandbox {
		return 0, fmt.Errorf("exec in the utility VM of task %s: it is not a Hyper-V pod's sandbox: %w", t.id, errdefs.ErrFailedPrecondition)
	}
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
	hp, err := t.sys.(*vmSystem).hcs.CreateProcess(cctx, params)
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

// ShareInVM shares the host folder hostPath into the sandbox's utility VM at guestPath
// (shimdiag share; hcsshim's uvm.Share). The share lasts as long as the VM.
func (t *Task) ShareInVM(ctx context.Context, hostPath, guestPath string, readOnly bool) error {
	if !t.sandbox {
		return fmt.Errorf("share into the utility VM of task %s: it is not a Hyper-V pod's sandbox: %w", t.id, errdefs.ErrFailedPrecondition)
	}
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	return t.vm.Share(cctx, hostPath, guestPath, readOnly)
}
