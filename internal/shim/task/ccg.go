package task

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// gMSA: a container with a credential spec gets a Container Credential Guard instance of its
// own, named by the container's id, made before the compute system and named in its document,
// and removed when the task goes, as hcsshim does (internal/credentials CreateCredentialGuard,
// hcsoci's resources_wcow.go: the instance is a resource of the container, released with it).
// HCS never removes an instance by itself, so the id is recorded in the bundle state before the
// instance exists: the delete action after a shim crash removes it too.

// addCCG makes the instance for c (process isolation: the LRPC transport) and names it in c's
// document.
func addCCG(ctx context.Context, deps Deps, c Config, state *bundleState, acquired *resources) error {
	if deps.CCG == nil {
		return fmt.Errorf("task %s: windows.credentialSpec: this shim has no Container Credential Guard: %w", c.ID, errdefs.ErrNotImplemented)
	}
	state.CCG = c.ID
	if err := writeState(c.Bundle, state); err != nil {
		return err
	}
	// From here a failure leaves at most an instance that release removes (one never made is
	// fine there).
	acquired.ccg = c.ID
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	st, err := deps.CCG.AddCredentialGuard(cctx, c.ID, c.CredentialSpec, schema2.CCGTransportLRPC)
	if err != nil {
		return fmt.Errorf("task %s: windows.credentialSpec: add a Container Credential Guard instance: %w", c.ID, err)
	}
	c.Document.Container.ContainerCredentialGuard = st
	log.G(ctx).WithField("task", c.ID).Info("Container Credential Guard instance added")
	return nil
}

// removeCCG removes instance id; one already gone is fine.
func removeCCG(ctx context.Context, deps Deps, id string) error {
	if deps.CCG == nil {
		return fmt.Errorf("remove Container Credential Guard instance %q: this shim has no Container Credential Guard: %w", id, errdefs.ErrNotImplemented)
	}
	if err := deps.CCG.RemoveCredentialGuard(ctx, id); err != nil && !hcs.IsGone(err) {
		return fmt.Errorf("remove Container Credential Guard instance %q: %w", id, err)
	}
	log.G(ctx).WithField("ccg", id).Debug("Container Credential Guard instance removed")
	return nil
}
