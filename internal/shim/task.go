package shim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/protocols/options"
)

// execsExitTimeout bounds how long the end of the init process waits for the execs it killed.
const execsExitTimeout = 30 * time.Second

// task is a process-isolated Windows container: its compute system, its mounted layers, its
// init process and its execs.
type task struct {
	svc    *service
	id     string
	bundle string
	spec   *specs.Spec
	chain  *layers.Chain
	// netns is the HNS namespace the shim made for the spec's endpoint list ("" if none).
	netns string
	sys   computeSystem
	init  *process

	mu    sync.Mutex
	execs map[string]*process
}

// createTask builds the container of a Create request: it reads the spec, mounts the layers
// and creates and starts the compute system (a Windows silo must run before processes can be
// created in it; Start then creates the init process). On failure it undoes what it did, in
// reverse order, and leaves no state behind.
func (s *service) createTask(ctx context.Context, req *taskapi.CreateTaskRequest) (_ *task, retErr error) {
	opts, err := decodeOptions(req.Options)
	if err != nil {
		return nil, err
	}
	applyLogLevel(ctx, opts)
	spec, err := readSpec(req.Bundle)
	if err != nil {
		return nil, err
	}
	if spec.Process == nil {
		return nil, fmt.Errorf("OCI spec of %s: process: missing: %w", req.ID, errdefs.ErrInvalidArgument)
	}
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	for k, v := range opts.GetDefaultContainerAnnotations() {
		if _, ok := spec.Annotations[k]; !ok {
			spec.Annotations[k] = v
		}
	}
	if hyperV(spec, opts) {
		return nil, fmt.Errorf("task %s: Hyper-V isolation is not supported by this shim yet (spec windows.hyperv, runtime option sandbox_isolation or annotation %s): %w",
			req.ID, oci.AnnotationLegacyIsolation, errdefs.ErrNotImplemented)
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
	// Translate before touching anything, so a bad spec changes nothing; the storage path is
	// filled in once the layers are mounted.
	doc, err := oci.ContainerDocument(spec, "pending-mount", chain.Parents)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	if _, err := oci.ProcessParameters(spec.Process, oci.Stdio{}); err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	logger := log.G(ctx).WithField("task", req.ID)
	// The image's OS build is not known here: containerd passes neither the image config nor
	// its os.version to a shim, so the process-isolation build check is left to HCS.

	var undo []func(context.Context) error
	defer func() {
		if retErr == nil {
			return
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hcsCallTimeout)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](uctx); err != nil {
				logger.WithError(err).Error("undo failed create")
			}
		}
	}()

	// Record what is about to exist before it exists, so the delete action can clean up
	// after a crash at any point from here on.
	state := &bundleState{SystemID: req.ID, Layers: chain}
	if err := writeBundleState(req.Bundle, state); err != nil {
		return nil, err
	}
	undo = append(undo, func(context.Context) error { return removeBundleState(req.Bundle) })

	netns := ""
	if ownsNamespace(spec) {
		endpoints := spec.Windows.Network.EndpointList
		hctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
		netns, err = createNamespace(hctx, s.hns, endpoints, func(id string) error {
			state.Namespace, state.Endpoints = id, endpoints
			return writeBundleState(req.Bundle, state)
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", req.ID, err)
		}
		undo = append(undo, func(ctx context.Context) error { return deleteNamespace(ctx, s.hns, netns, endpoints) })
		doc.Container.Networking.Namespace = netns
		doc.Container.Networking.NetworkAdapters = nil
	}

	volume, err := s.layers.Mount(ctx, chain)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", req.ID, err)
	}
	undo = append(undo, func(ctx context.Context) error { return s.layers.Unmount(ctx, chain.Scratch) })
	doc.Container.Storage.Path = volume

	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	sys, err := s.host.CreateComputeSystem(cctx, req.ID, doc)
	if err != nil {
		return nil, fmt.Errorf("create compute system %q: %w", req.ID, err)
	}
	undo = append(undo, func(ctx context.Context) error {
		err := sys.Terminate(ctx)
		if err != nil && s.host.IsGone(err) {
			err = nil
		}
		return errors.Join(err, sys.Close())
	})
	if err := sys.Start(cctx); err != nil {
		return nil, fmt.Errorf("start compute system %q: %w", req.ID, err)
	}
	t := &task{
		svc:    s,
		id:     req.ID,
		bundle: req.Bundle,
		spec:   spec,
		chain:  chain,
		netns:  netns,
		sys:    sys,
		execs:  map[string]*process{},
	}
	t.init = newProcess(t, "", spec.Process, stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal})
	logger.WithField("volume", volume).Info("compute system created")
	return t, nil
}

// hyperV reports whether the task asks for Hyper-V isolation (DESIGN.md, isolation).
func hyperV(spec *specs.Spec, opts *options.Options) bool {
	return spec.Windows.HyperV != nil ||
		opts.GetSandboxIsolation() == options.Options_HYPERVISOR ||
		spec.Annotations[oci.AnnotationLegacyIsolation] == "hyperv"
}

func (t *task) process(execID string) (*process, error) {
	if execID == "" {
		return t.init, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.execs[execID]
	if !ok {
		return nil, fmt.Errorf("exec %q of task %s: %w", execID, t.id, errdefs.ErrNotFound)
	}
	return p, nil
}

func (t *task) addExec(execID string, spec *specs.Process, io stdio.Config) (*process, error) {
	if st := t.init.status().state; st != (runningState{}) {
		return nil, fmt.Errorf("exec %q in task %s: the task is %s: %w", execID, t.id, st, errdefs.ErrFailedPrecondition)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.execs[execID]; ok {
		return nil, fmt.Errorf("exec %q in task %s: %w", execID, t.id, errdefs.ErrAlreadyExists)
	}
	p := newProcess(t, execID, spec, io)
	t.execs[execID] = p
	return p, nil
}

func (t *task) removeExec(execID string) {
	t.mu.Lock()
	delete(t.execs, execID)
	t.mu.Unlock()
}

func (t *task) execList() []*process {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*process, 0, len(t.execs))
	for p := range maps.Values(t.execs) {
		out = append(out, p)
	}
	return out
}

// afterInitExit runs when the init process exited, before its exit is published: as in
// hcsshim, the container ends with its init process, so the execs are killed (and their
// exits published first) and the compute system is terminated.
func (t *task) afterInitExit(ctx context.Context) {
	deadline := time.After(execsExitTimeout)
	for _, p := range t.execList() {
		if p.exited() {
			continue
		}
		if _, created := p.status().state.(createdState); created {
			// Never started: it ends with the container.
			p.recordExit(ctx, exitCodeKilledCreated, time.Now())
			continue
		}
		if err := p.kill(ctx, sigKILL); err != nil && !errdefs.IsNotFound(err) {
			p.logger(ctx).WithError(err).Warn("kill exec after init exit")
		}
		select {
		case <-p.done:
		case <-deadline:
			p.logger(ctx).Error("exec did not exit after its container's init process")
		}
	}
	tctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	if err := terminateSystem(tctx, t.svc.host, t.sys); err != nil {
		log.G(ctx).WithError(err).WithField("task", t.id).Warn("terminate compute system after init exit")
	}
}

// terminateSystem terminates sys; a system that is already gone is not an error. When the
// handle fails otherwise (it may be stale: the HCS service restarted, and with it every
// compute system), the service is asked afresh by id.
func terminateSystem(ctx context.Context, host hcsHost, sys computeSystem) error {
	err := sys.Terminate(ctx)
	if err == nil || host.IsGone(err) {
		return nil
	}
	fresh, oerr := host.OpenComputeSystem(ctx, sys.ID())
	if oerr != nil {
		if host.IsGone(oerr) {
			return nil
		}
		return fmt.Errorf("terminate compute system %q: %w (and reopening it: %v)", sys.ID(), err, oerr)
	}
	defer fresh.Close()
	if err := fresh.Terminate(ctx); err != nil && !host.IsGone(err) {
		return fmt.Errorf("terminate compute system %q: %w", sys.ID(), err)
	}
	return nil
}

// cleanup terminates the compute system, unmounts the layers and removes the task's state.
// It is idempotent; a failure is returned and retried by the next call.
func (t *task) cleanup(ctx context.Context) error {
	var errs []error
	cctx, cancel := context.WithTimeout(ctx, hcsCallTimeout)
	defer cancel()
	if err := terminateSystem(cctx, t.svc.host, t.sys); err != nil {
		errs = append(errs, err)
	}
	if err := t.svc.layers.Unmount(cctx, t.chain.Scratch); err != nil {
		errs = append(errs, err)
	}
	if t.netns != "" {
		if err := deleteNamespace(cctx, t.svc.hns, t.netns, t.spec.Windows.Network.EndpointList); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	_ = t.sys.Close()
	return removeBundleState(t.bundle)
}
