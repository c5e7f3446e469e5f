package shim

import (
	"context"
	"fmt"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/internal/uvm"
	"github.com/openhcs/runhcs/protocols/options"
)

// Hyper-V isolated pods, as hcsshim runs them (cmd/containerd-shim-runhcs-v1/pod.go): the
// shim serves one pod (containerd starts one shim per io.kubernetes.cri.sandbox-id, start.go),
// whose sandbox task (io.kubernetes.cri.container-type=sandbox) is its utility VM <pod id>@vm,
// and whose containers (container-type=container, naming the sandbox) are hosted in that VM. A
// Hyper-V task without those annotations gets a VM of its own (<task id>@vm).

// CRI's container types (the io.kubernetes.cri.container-type annotation).
const (
	containerTypeSandbox   = "sandbox"
	containerTypeContainer = "container"
)

// processorCounter is what the shim needs to clamp a VM's processors: the host's logical
// processor count (an *hcs.Client's HostProcessorCount, through hcsHost).
type processorCounter interface {
	HostProcessorCount(ctx context.Context) (uint32, error)
}

// createHyperV translates the Create request of a Hyper-V isolated task and hands it to the
// pod, which creates the task of its kind: the pod's sandbox (its VM), a container in the pod's
// VM, or, outside a pod, a container in a VM of its own. credSpec is the checked credential
// spec ("" if none).
func (s *service) createHyperV(ctx context.Context, req *taskapi.CreateTaskRequest, spec *specs.Spec, opts *options.Options, chain *layers.Chain, credSpec string) (task.Task, error) {
	kind := spec.Annotations[oci.AnnotationContainerType]
	sandboxID := spec.Annotations[oci.AnnotationSandboxID]
	io := stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal}
	switch kind {
	case containerTypeSandbox:
		// hcsshim's createPod: the sandbox names itself.
		if sandboxID != "" && sandboxID != req.ID {
			return nil, fmt.Errorf("task %s: annotation %s=%q: a sandbox must name itself: %w", req.ID, oci.AnnotationSandboxID, sandboxID, errdefs.ErrFailedPrecondition)
		}
		if credSpec != "" {
			// The sandbox is the VM and runs no workload that could use a gMSA (hcsshim's pod
			// sandbox task makes no container; the container its execs run in is the pause
			// image's, sandboxexec.go).
			return nil, fmt.Errorf("task %s: windows.credentialSpec on a Hyper-V pod's sandbox, which runs no container: give it to the pod's containers: %w", req.ID, errdefs.ErrInvalidArgument)
		}
		if err := s.pod.CanCreateVMSandbox(req.ID); err != nil {
			return nil, err
		}
		o, err := s.vmOptions(ctx, req.ID, spec, opts, chain.Parents, chain.Scratch)
		if err != nil {
			return nil, err
		}
		// The sandbox's own container, where its execs run (containerd 1.7's port-forward runs
		// wincat.exe of the pause image there): made in the VM at the first exec.
		doc, err := s.hostedDocument(req.ID, spec, chain)
		if err != nil {
			return nil, err
		}
		sc := task.SandboxConfig{ID: req.ID, Bundle: req.Bundle, VM: o, IO: io, Endpoints: task.OwnEndpoints(spec),
			Container:   &task.Config{ID: req.ID, Bundle: req.Bundle, Chain: chain, Document: doc, Process: spec.Process},
			ScratchDisk: uvm.ScratchDisk(chain.Scratch)}
		if n := spec.Windows.Network; n != nil {
			sc.NetworkNamespace = n.NetworkNamespace
		}
		return s.pod.CreateVMSandbox(ctx, sc)
	case containerTypeContainer:
		if err := s.pod.CanHost(req.ID, sandboxID); err != nil {
			return nil, err
		}
		doc, err := s.hostedDocument(req.ID, spec, chain)
		if err != nil {
			return nil, err
		}
		return s.pod.CreateHosted(ctx, sandboxID, task.Config{
			ID:       req.ID,
			Bundle:   req.Bundle,
			Chain:    chain,
			Document: doc,
			Process:  spec.Process,
			IO:       io,
			// Refused: the pod's network is its sandbox's (task.CreateHosted).
			Endpoints:      task.OwnEndpoints(spec),
			CredentialSpec: credSpec,
		}, uvm.ScratchDisk(chain.Scratch))
	}
	if kind != "" {
		return nil, fmt.Errorf("task %s: annotation %s=%q: want %q or %q: %w",
			req.ID, oci.AnnotationContainerType, kind, containerTypeSandbox, containerTypeContainer, errdefs.ErrInvalidArgument)
	}
	// Outside a pod (no CRI annotations: ctr, the Go client), the task gets a VM of its own,
	// booted from its own image, as hcsshim's newHcsStandaloneTask does (task_hcs.go).
	o, err := s.vmOptions(ctx, req.ID, spec, opts, chain.Parents, chain.Scratch)
	if err != nil {
		return nil, err
	}
	doc, err := s.hostedDocument(req.ID, spec, chain)
	if err != nil {
		return nil, err
	}
	return s.pod.CreateStandalone(ctx, o, task.Config{ID: req.ID, Bundle: req.Bundle, Chain: chain, Document: doc, Process: spec.Process, IO: io,
		Endpoints: task.OwnEndpoints(spec), CredentialSpec: credSpec}, uvm.ScratchDisk(chain.Scratch))
}

// vmOptions sizes the utility VM of the task or sandbox id (<id>@vm) from spec's annotations
// and resources and the runtime options, and finds its boot layer among parents (the task's
// layers, or a sandbox-API sandbox's boot image's), nearest first; scratch is the snapshot
// that may hold the VM's scratch disk ("" for none).
func (s *service) vmOptions(ctx context.Context, id string, spec *specs.Spec, opts *options.Options, parents []string, scratch string) (*uvm.Options, error) {
	pc, ok := s.deps.Host.(processorCounter)
	if !ok {
		return nil, fmt.Errorf("task %s: the host cannot report its processors: %w", id, errdefs.ErrNotImplemented)
	}
	qctx, cancel := context.WithTimeout(ctx, task.HCSCallTimeout)
	n, err := pc.HostProcessorCount(qctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("task %s: host processors: %w", id, err)
	}
	size, err := oci.VMSizing(spec, opts, n)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	o := &uvm.Options{ID: uvm.VMID(id), Owner: oci.Owner, VMSize: size}
	if o.BootLayer, err = uvm.FindBootLayer(parents); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	if scratch != "" {
		o.ScratchDisk = uvm.VMScratchDisk(scratch)
	}
	return o, nil
}

// hostedDocument is the container document of a task to host in a utility VM (its storage,
// mounts and pipes are filled in from the VM's shares by the task package).
func (s *service) hostedDocument(id string, spec *specs.Spec, chain *layers.Chain) (*schema2.ComputeSystem, error) {
	doc, err := oci.ContainerDocument(spec, "pending-mount", chain.Parents)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	doc.Owner = oci.Owner
	if _, err := oci.ProcessParameters(spec.Process, oci.Stdio{}); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return doc, nil
}
