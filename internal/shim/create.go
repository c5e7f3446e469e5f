package shim

import (
	"context"
	"errors"
	"fmt"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// createTask translates a Create request: it reads the spec and the runtime options, checks
// and translates them before anything is touched (so a bad spec changes nothing), and hands
// the result to task.Create, which mounts the layers and creates the compute system.
func (s *service) createTask(ctx context.Context, req *taskapi.CreateTaskRequest) (task.Task, error) {
	opts, err := decodeOptions(req.Options)
	if err != nil {
		return nil, err
	}
	applyLogLevel(ctx, opts)
	spec, err := task.ReadSpec(req.Bundle)
	if err != nil {
		return nil, err
	}
	if spec.Process == nil {
		return nil, fmt.Errorf("OCI spec of %s: process: missing: %w", req.ID, errdefs.ErrInvalidArgument)
	}
	if err := s.pod.Join(req.ID, spec.Annotations[oci.AnnotationSandboxID]); err != nil {
		return nil, err
	}
	oci.ApplyOptions(spec, opts)
	hostProcess, err := oci.HostProcess(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	iso, err := oci.ResolveIsolation(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	// The request's terminal flag is what the client set its stdio up for.
	spec.Process.Terminal = req.Terminal

	chain, err := layers.FromMounts(req.Rootfs)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	if chain == nil {
		if chain, err = layers.FromLayerFolders(spec.Windows.LayerFolders); err != nil {
			return nil, fmt.Errorf("task %s: %w", req.ID, err)
		}
	}
	if chain == nil {
		return nil, fmt.Errorf("task %s: no rootfs: neither a %q rootfs mount nor windows.layerFolders: %w", req.ID, layers.MountType, errdefs.ErrInvalidArgument)
	}
	credSpec, err := oci.CredentialSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	if hostProcess {
		return s.createJob(ctx, req, spec, chain, credSpec)
	}
	if iso == oci.IsolationHyperV {
		return s.createHyperV(ctx, req, spec, opts, chain, credSpec)
	}
	// The storage path is filled in once the layers are mounted.
	doc, err := oci.ContainerDocument(spec, "pending-mount", chain.Parents)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	if _, err := oci.ProcessParameters(spec.Process, oci.Stdio{}); err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	// The image's OS build is not known here: containerd passes neither the image config nor
	// its os.version to a shim (its CRI filters images by os.version when it pulls them), so
	// the process-isolation build check is HCS's ("the OS compute service will return a version
	// incompatibility error", VirtDocs version-compatibility.md; hcsshim makes no check of its
	// own either); the shim makes its refusal say what to do (imageMismatch).
	t, err := s.pod.CreateContainer(ctx, spec.Annotations[oci.AnnotationSandboxID], task.Config{
		ID:       req.ID,
		Bundle:   req.Bundle,
		Chain:    chain,
		Document: doc,
		Process:  spec.Process,
		IO:       stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal},
		// Endpoints listed without a namespace go into one the task makes, as hcsshim does.
		Endpoints:      task.OwnEndpoints(spec),
		CredentialSpec: credSpec,
	})
	if errors.Is(err, computecore.HCS_E_IMAGE_MISMATCH) {
		return nil, s.imageMismatch(ctx, req.ID, err)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// osVersioner is what the shim needs to name the host's build in an error (an *hcs.Client's
// HostOSVersion, through hcsHost).
type osVersioner interface {
	HostOSVersion(ctx context.Context) (string, error)
}

// imageMismatch explains HCS's HCS_E_IMAGE_MISMATCH for a process-isolated container, whose message
// ("The operating system of the container does not match the operating system of the host.",
// docs/notes/hyperv.md §4) names no build: the host's build, the rule, and the two ways out.
func (s *service) imageMismatch(ctx context.Context, id string, err error) error {
	host := "unknown"
	if v, ok := s.deps.Host.(osVersioner); ok {
		qctx, cancel := context.WithTimeout(ctx, task.HCSCallTimeout)
		if hv, herr := v.HostOSVersion(qctx); herr == nil {
			host = hv
		}
		cancel()
	}
	return fmt.Errorf("task %s: process isolation runs only images of the host's Windows build (host: %s; from Windows Server 2022 on also those of the previous LTSC build): "+
		"use an image of the host's build, or Hyper-V isolation (runtime handler runhcs-wcow-hypervisor), which runs older builds: %w", id, host, err)
}
