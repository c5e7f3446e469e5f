package pod

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/internal/uvm"
)

// Pod is the pod a shim serves: its tasks, its isolation and, for a Hyper-V pod, its sandbox
// and utility VM. Its mutex guards its tables only and is never held across an HCS call.
type Pod struct {
	// deps is what the shim gives every task (its context, host, mounter, event sink), shared
	// with the task service, which fills it in.
	deps *task.Deps

	mu       sync.Mutex
	tasks    map[string]task.Task
	creating map[string]struct{} // ids being created, reserved without holding mu across HCS calls
	// sandbox is a Hyper-V pod's sandbox task, which owns vm, the pod's utility VM (nil for a
	// process-isolated pod); sandboxCreating reserves it while it is created.
	sandbox         *task.VMSandbox
	vm              *uvm.VM
	sandboxCreating bool
	// apiSandbox is the pod's sandbox when containerd runs it through the sandbox API
	// (sandboxer = "shim"); apiCreating reserves it while it is created.
	apiSandbox  *sandbox.Sandbox
	apiCreating bool
}

// New makes an empty pod whose tasks are given *deps.
func New(deps *task.Deps) *Pod {
	return &Pod{deps: deps, tasks: map[string]task.Task{}, creating: map[string]struct{}{}}
}

// Isolation is the pod's isolation: Hyper-V once it has a VM sandbox, process otherwise.
func (p *Pod) Isolation() oci.Isolation {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sandbox != nil {
		return oci.IsolationHyperV
	}
	return oci.IsolationProcess
}

// Reserve reserves id for a task being created; Commit ends the reservation.
func (p *Pod) Reserve(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.tasks[id]; ok {
		return fmt.Errorf("task %q: %w", id, errdefs.ErrAlreadyExists)
	}
	if _, ok := p.creating[id]; ok {
		return fmt.Errorf("task %q is being created: %w", id, errdefs.ErrAlreadyExists)
	}
	p.creating[id] = struct{}{}
	return nil
}

// Commit ends the reservation of id and adds t, when its create succeeded (t not nil).
func (p *Pod) Commit(id string, t task.Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.creating, id)
	if t != nil {
		p.tasks[id] = t
	}
}

// Get returns the task id.
func (p *Pod) Get(id string) (task.Task, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %q: %w", id, errdefs.ErrNotFound)
	}
	return t, nil
}

// Remove forgets the deleted task id; a deleted Hyper-V sandbox takes the pod's VM with it.
func (p *Pod) Remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tasks, id)
	if p.sandbox != nil && p.sandbox.ID() == id {
		p.sandbox, p.vm = nil, nil
	}
}

// Tasks returns the pod's tasks, by id.
func (p *Pod) Tasks() []task.Task {
	p.mu.Lock()
	out := slices.Collect(maps.Values(p.tasks))
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b task.Task) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}

// Len is the number of tasks the pod has or is creating, and of its sandbox-API sandbox (until
// it is shut down): what keeps the shim serving.
func (p *Pod) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.tasks) + len(p.creating)
	if p.apiSandbox != nil || p.apiCreating {
		n++
	}
	return n
}

// VMSandbox returns the Hyper-V pod's sandbox, nil if the pod has none.
func (p *Pod) VMSandbox() *task.VMSandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sandbox
}

// CreateContainer creates a process-isolated container of the pod. sandboxID is the pod it
// names (io.kubernetes.cri.sandbox-id), "" outside a pod.
func (p *Pod) CreateContainer(ctx context.Context, sandboxID string, c task.Config) (*task.Container, error) {
	if err := p.refuseMixed(c.ID, sandboxID); err != nil {
		return nil, err
	}
	if err := p.refuseHostProcessMix(c.ID, sandboxID, false); err != nil {
		return nil, err
	}
	return task.Create(ctx, *p.deps, c)
}

// CreateJobContainer creates a HostProcess container (a job container) of the pod sandboxID
// ("" outside a pod).
func (p *Pod) CreateJobContainer(ctx context.Context, sandboxID string, c task.JobConfig) (*task.JobContainer, error) {
	if err := p.refuseHostProcessMix(c.ID, sandboxID, true); err != nil {
		return nil, err
	}
	return task.CreateJob(ctx, *p.deps, c)
}

// CreateHostProcessSandbox creates a HostProcess pod's sandbox, which makes the pod a
// HostProcess pod: every container that joins it must be a HostProcess container.
func (p *Pod) CreateHostProcessSandbox(ctx context.Context, c task.HostProcessSandboxConfig) (*task.HostProcessSandbox, error) {
	return task.CreateHostProcessSandbox(ctx, *p.deps, c)
}

// HostProcessPodAnnotations returns the annotations the HostProcess pod sandboxID passes to its
// containers (task.HostProcessSandbox.PodAnnotations); nil when this shim serves no such pod.
func (p *Pod) HostProcessPodAnnotations(sandboxID string) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sb, ok := p.tasks[sandboxID].(*task.HostProcessSandbox); ok {
		return sb.PodAnnotations()
	}
	return nil
}

// refuseHostProcessMix refuses a container whose kind differs from its pod's: every container
// of a HostProcess pod is a HostProcess container and none of another pod is (Kubernetes'
// rule, which containerd's CRI enforces before a shim is asked, container_create.go; hcsshim's
// pod.go refuses the first case too). Clients other than CRI reach the shim directly.
func (p *Pod) refuseHostProcessMix(id, sandboxID string, hostProcess bool) error {
	if sandboxID == "" || sandboxID == id {
		return nil
	}
	p.mu.Lock()
	sb, known := p.tasks[sandboxID]
	p.mu.Unlock()
	if vm := p.VMSandbox(); vm != nil && vm.ID() == sandboxID {
		sb, known = vm, true
	}
	if !known {
		return nil
	}
	_, podIsHostProcess := sb.(*task.HostProcessSandbox)
	switch {
	case hostProcess && !podIsHostProcess:
		return fmt.Errorf("task %s: annotation %s=\"true\", but its pod %s is not a HostProcess pod (its sandbox lacks the annotation): %w",
			id, oci.AnnotationHostProcess, sandboxID, errdefs.ErrFailedPrecondition)
	case !hostProcess && podIsHostProcess:
		return fmt.Errorf("task %s: annotation %s is not \"true\", but its pod %s is a HostProcess pod, whose containers all are: %w",
			id, oci.AnnotationHostProcess, sandboxID, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// refuseMixed refuses a process-isolated container in a Hyper-V pod (hcsshim's pod.CreateTask
// refuses a container whose isolation differs from its pod's).
func (p *Pod) refuseMixed(id, sandboxID string) error {
	if sandboxID == "" || sandboxID == id {
		return nil
	}
	if sb := p.VMSandbox(); sb != nil && sb.ID() == sandboxID {
		return fmt.Errorf("task %s: a process-isolated container in the Hyper-V pod %s: %w", id, sandboxID, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// CanCreateVMSandbox says whether the pod may take the Hyper-V sandbox id: a pod has one, so a
// second is refused. The service asks it before translating the sandbox's request;
// CreateVMSandbox asks again.
func (p *Pod) CanCreateVMSandbox(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.canCreateVMSandboxLocked(id)
}

func (p *Pod) canCreateVMSandboxLocked(id string) error {
	switch {
	case p.sandbox != nil:
		return fmt.Errorf("task %s: this shim already serves the Hyper-V pod %s: %w", id, p.sandbox.ID(), errdefs.ErrAlreadyExists)
	case p.sandboxCreating:
		return fmt.Errorf("task %s: this shim is already creating a Hyper-V pod's sandbox: %w", id, errdefs.ErrAlreadyExists)
	}
	return nil
}

// CreateVMSandbox creates the Hyper-V pod's sandbox, its utility VM, which the pod's
// containers are then hosted in.
func (p *Pod) CreateVMSandbox(ctx context.Context, c task.SandboxConfig) (*task.VMSandbox, error) {
	return p.createVMSandbox(ctx, *p.deps, c)
}

// CreateAPIVM creates the utility VM of the pod's Hyper-V sandbox-API sandbox as a Hyper-V
// pod's sandbox task that containerd never sees as a task: its events go nowhere (the sandbox
// API reports the pod's end through WaitSandbox; a TaskExit of the sandbox id would be a
// task containerd does not know), and the pod's containers are hosted in its VM as in a
// pause-container pod. ReleaseAPIVM removes it.
func (p *Pod) CreateAPIVM(ctx context.Context, c task.SandboxConfig) (*task.VMSandbox, error) {
	deps := *p.deps
	deps.Events = discardEvents{}
	return p.createVMSandbox(ctx, deps, c)
}

// ReleaseAPIVM deletes the sandbox task CreateAPIVM made (its VM, its state) and forgets it.
func (p *Pod) ReleaseAPIVM(ctx context.Context, t *task.VMSandbox) error {
	if _, err := t.Delete(ctx, ""); err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	p.Remove(t.ID())
	return nil
}

// discardEvents drops the events of a task containerd does not know (CreateAPIVM).
type discardEvents struct{}

func (discardEvents) Send(string, events.Event) {}

func (p *Pod) createVMSandbox(ctx context.Context, deps task.Deps, c task.SandboxConfig) (*task.VMSandbox, error) {
	p.mu.Lock()
	if err := p.canCreateVMSandboxLocked(c.ID); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.sandboxCreating = true
	p.mu.Unlock()

	sb, err := task.CreateVMSandbox(ctx, deps, c)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.sandboxCreating = false
	if err != nil {
		return nil, err
	}
	p.sandbox, p.vm = sb, sb.VM()
	return sb, nil
}

// CanHost says whether the container id, naming the pod sandboxID, can be hosted in the pod's
// VM: the pod must be a Hyper-V pod of that id. The service asks it before translating the
// container's request; CreateHosted asks again.
func (p *Pod) CanHost(id, sandboxID string) error {
	_, err := p.hostingVM(id, sandboxID)
	return err
}

func (p *Pod) hostingVM(id, sandboxID string) (*uvm.VM, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sandbox == nil || p.sandbox.ID() != sandboxID {
		return nil, fmt.Errorf("task %s: annotation %s=%q: no Hyper-V pod sandbox of that id in this shim: %w", id, oci.AnnotationSandboxID, sandboxID, errdefs.ErrFailedPrecondition)
	}
	return p.vm, nil
}

// CreateHosted creates a container of the Hyper-V pod sandboxID in the pod's VM.
func (p *Pod) CreateHosted(ctx context.Context, sandboxID string, c task.Config, scratchDisk string) (*task.HostedContainer, error) {
	vm, err := p.hostingVM(c.ID, sandboxID)
	if err != nil {
		return nil, err
	}
	return task.CreateHosted(ctx, *p.deps, vm, c, scratchDisk)
}

// CreateStandalone creates a Hyper-V task outside a pod, in a VM of its own.
func (p *Pod) CreateStandalone(ctx context.Context, vm *uvm.Options, c task.Config, scratchDisk string) (*task.Standalone, error) {
	return task.CreateStandalone(ctx, *p.deps, vm, c, scratchDisk)
}

// CreateAPISandbox creates the pod's sandbox served through containerd's sandbox API
// (internal/shim/sandbox; sandboxer = "shim"), which the pod's containers then join as tasks.
// A shim serves one such sandbox: a second is refused.
func (p *Pod) CreateAPISandbox(ctx context.Context, c sandbox.Config) (*sandbox.Sandbox, error) {
	p.mu.Lock()
	if p.apiSandbox != nil || p.apiCreating {
		p.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: this shim already serves a sandbox: %w", c.ID, errdefs.ErrAlreadyExists)
	}
	p.apiCreating = true
	p.mu.Unlock()

	sb, err := sandbox.Create(ctx, c)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.apiCreating = false
	if err != nil {
		return nil, err
	}
	p.apiSandbox = sb
	return sb, nil
}

// APISandbox returns the pod's sandbox-API sandbox if it is id.
func (p *Pod) APISandbox(id string) (*sandbox.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apiSandbox == nil || p.apiSandbox.ID() != id {
		return nil, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return p.apiSandbox, nil
}

// RemoveAPISandbox forgets sb once it was shut down.
func (p *Pod) RemoveAPISandbox(sb *sandbox.Sandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apiSandbox == sb {
		p.apiSandbox = nil
	}
}

// Join checks that the task id, naming the pod sandboxID, may join the pod's sandbox-API
// sandbox (only a ready sandbox takes containers). A task of no such pod is not concerned.
func (p *Pod) Join(id, sandboxID string) error {
	p.mu.Lock()
	sb := p.apiSandbox
	p.mu.Unlock()
	if sb == nil || sandboxID != sb.ID() {
		return nil
	}
	return sb.Join(id)
}
