package uvm

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
)

// Storage is a hosted container's storage in the VM: a VSMB share per read-only layer, its
// scratch disk on SCSI, and the layers combined over the scratch in the guest (hcsshim's
// internal/layers/wcow_mount.go mountHypervIsolatedWCIFSLayers).
type Storage struct {
	vm       *VM
	shares   []*Share
	scratch  *Disk
	combined bool
	// Path is the container's root in the guest (its Storage.Path): the scratch's mount.
	Path string
	// Layers are the container document's Storage.Layers: the shares, nearest first.
	Layers []schema2.Layer
}

// MountLayers makes a container's storage from its read-only layer folders (nearest first)
// and its scratch disk. On failure what it made is released, in reverse order.
func (vm *VM) MountLayers(ctx context.Context, parents []string, scratchDisk string) (_ *Storage, retErr error) {
	if len(parents) == 0 {
		return nil, fmt.Errorf("container storage in utility VM %s: no read-only layers: %w", vm.id, errdefs.ErrInvalidArgument)
	}
	st := &Storage{vm: vm}
	defer func() {
		if retErr != nil {
			if err := st.Release(context.WithoutCancel(ctx)); err != nil {
				retErr = fmt.Errorf("%w (and undoing it: %v)", retErr, err)
			}
		}
	}()
	for _, p := range parents {
		s, err := vm.AddShare(ctx, p, true, true)
		if err != nil {
			return nil, err
		}
		st.shares = append(st.shares, s)
		st.Layers = append(st.Layers, schema2.Layer{Id: oci.LayerID(p), Path: s.GuestPath})
	}
	d, err := vm.AddDisk(ctx, scratchDisk)
	if err != nil {
		return nil, err
	}
	st.scratch, st.Path = d, d.GuestPath
	if err := vm.add(ctx, st.combineRequest(schema2.RequestTypeAdd)); err != nil {
		return nil, fmt.Errorf("combine layers at %s: %w", st.Path, err)
	}
	st.combined = true
	return st, nil
}

func (st *Storage) combineRequest(rt schema2.RequestType) *schema2.ModifySettingRequest {
	// FilterType is deliberately absent: inbox GCS on Windows Server 2022 refuses it
	// (hcsshim#2714; hcsshim's combine_layers.go).
	return &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeCombinedLayers,
		RequestType:  rt,
		Settings:     &schema2.CombinedLayers{ContainerRootPath: st.Path, Layers: st.Layers},
	}}
}

// Release undoes MountLayers in reverse order: the combined layers, the scratch, the shares
// from the base up. It is idempotent; what failed stays held and a retry releases it.
func (st *Storage) Release(ctx context.Context) error {
	if st.combined {
		if err := st.vm.remove(ctx, st.combineRequest(schema2.RequestTypeRemove)); err != nil {
			return err
		}
		st.combined = false
	}
	if st.scratch != nil {
		if err := st.vm.ReleaseDisk(ctx, st.scratch); err != nil {
			return err
		}
		st.scratch = nil
	}
	var errs []error
	var kept []*Share
	for i := len(st.shares) - 1; i >= 0; i-- {
		if err := st.vm.ReleaseShare(ctx, st.shares[i]); err != nil {
			errs = append(errs, err)
			kept = append([]*Share{st.shares[i]}, kept...)
		}
	}
	st.shares = kept
	return errors.Join(errs...)
}
