package shim

import (
	"context"
	"fmt"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// createTask translates a Create request: it reads the spec and the runtime options, checks
// and translates them before anything is touched (so a bad spec changes nothing), and hands
// the result to task.Create, which mounts the layers and creates the compute system.
func (s *service) createTask(ctx context.Context, req *taskapi.CreateTaskRequest) (*task.Task, error) {
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
	oci.ApplyOptions(spec, opts)
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
	if iso == oci.IsolationHyperV {
		return s.createHyperV(ctx, req, spec, opts, chain, credSpec)
	}
	if err := s.refuseMixedPod(req.ID, spec); err != nil {
		return nil, err
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
	// its os.version to a shim, so the process-isolation build check is left to HCS.
	return task.Create(ctx, s.deps, task.Config{
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
}
