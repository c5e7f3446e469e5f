package task

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/uvm"
)

// gMSA: a container with a credential spec gets a Container Credential Guard instance of its
// own, named by the container's id, made before the compute system and named in its document,
// and removed when the task goes, as hcsshim does (internal/credentials CreateCredentialGuard,
// hcsoci's resources_wcow.go: the instance is a resource of the container, released with it).
// HCS never removes an instance by itself, so the id is recorded in the bundle state before the
// instance exists: the delete action after a shim crash removes it too.

// A container in a utility VM gets an instance of transport HvSocket, whose HvSocket service
// (the instance's HvSocketConfig) is added to the VM's service table before the container is
// created, so that the container can reach the instance on the host, and removed when the task
// goes (hcsshim hcsoci/resources_wcow.go, CreateCredentialGuard's step 4). The entry lives in
// the VM: a shim crash ends the VM (ShouldTerminateOnLastHandleClosed) and the entry with it,
// and the delete action removes the instance.

// addCCG makes the instance for c over transport and names it in c's document.
func addCCG(ctx context.Context, deps Deps, c Config, state *bundleState, acquired *resources, transport string) (*schema2.ContainerCredentialGuardInstance, error) {
	if deps.CCG == nil {
		return nil, fmt.Errorf("task %s: windows.credentialSpec: this shim has no Container Credential Guard: %w", c.ID, errdefs.ErrNotImplemented)
	}
	state.CCG = c.ID
	if err := writeState(c.Bundle, state); err != nil {
		return nil, err
	}
	// From here a failure leaves at most an instance that release removes (one never made is
	// fine there).
	acquired.ccg = c.ID
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	in, err := deps.CCG.AddCredentialGuard(cctx, c.ID, c.CredentialSpec, transport)
	if err != nil {
		return nil, fmt.Errorf("task %s: windows.credentialSpec: add a Container Credential Guard instance: %w", c.ID, err)
	}
	c.Document.Container.ContainerCredentialGuard = in.CredentialGuard
	log.G(ctx).WithFields(log.Fields{"task": c.ID, "transport": transport}).Info("Container Credential Guard instance added")
	return in, nil
}

// addHostedCCG makes the HvSocket instance for c, hosted in vm, and adds its service to the VM;
// the entry's removal goes into acquired.vmRelease (before the VM's own release, if the task owns
// the VM, so it runs after nothing else of the VM's).
func addHostedCCG(ctx context.Context, deps Deps, c Config, vm *uvm.VM, state *bundleState, acquired *resources) error {
	in, err := addCCG(ctx, deps, c, state, acquired, schema2.CCGTransportHvSocket)
	if err != nil {
		return err
	}
	svc := in.HvSocketConfig
	if svc == nil {
		return fmt.Errorf("task %s: windows.credentialSpec: Container Credential Guard instance %q has no HvSocket service for utility VM %s: %w", c.ID, c.ID, vm.ID(), errdefs.ErrFailedPrecondition)
	}
	cctx, cancel := context.WithTimeout(ctx, HCSCallTimeout)
	defer cancel()
	if err := vm.AddHvSocketService(cctx, svc.ServiceId, svc.ServiceConfig); err != nil {
		return fmt.Errorf("task %s: windows.credentialSpec: the HvSocket service of its Container Credential Guard instance: %w", c.ID, err)
	}
	id := svc.ServiceId
	acquired.vmRelease = append(acquired.vmRelease, releaseOnce(func(ctx context.Context) error { return vm.RemoveHvSocketService(ctx, id) }))
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
