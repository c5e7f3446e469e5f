package uvm

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// SCSIController is the key of a WCOW utility VM's only SCSI controller: the first of
// hcsshim's V5 controller GUIDs (internal/protocol/guestrequest/types.go ScsiControllerGuids).
const SCSIController = "df6d0690-79e5-55b6-a5ec-c1e2f77f580a"

// lunsPerController is fixed by Hyper-V (hcsshim's internal/uvm/start.go: 64 LUNs).
const lunsPerController = schema2.SCSILUNsPerController

// scsiMountFormat is where the guest mounts a disk (hcsshim's
// internal/guestpath WCOWGlobalScsiMountPrefixFmt).
const scsiMountFormat = `c:\mounts\scsi\m%d`

// Disk is a SCSI disk attached to the VM and mounted in its guest.
type Disk struct {
	HostPath  string
	LUN       int
	GuestPath string // where the guest mounted it
}

// AddDisk attaches the writable virtual disk hostPath at the first free LUN of controller 0
// and mounts it in the guest (MappedVirtualDisk), or takes another reference to it. If the
// guest mount fails the disk is detached again.
func (vm *VM) AddDisk(ctx context.Context, hostPath string) (*Disk, error) {
	return vm.disks.acquire(hostPath, func() (*Disk, error) {
		lun, mount, err := vm.reserveLUN()
		if err != nil {
			return nil, fmt.Errorf("attach %s to utility VM %s: %w", hostPath, vm.id, err)
		}
		d := &Disk{HostPath: hostPath, LUN: lun, GuestPath: fmt.Sprintf(scsiMountFormat, mount)}
		if err := vm.add(ctx, &schema2.ModifySettingRequest{
			ResourcePath: fmt.Sprintf(schema2.ResourcePathSCSIFormat, SCSIController, lun),
			RequestType:  schema2.RequestTypeAdd,
			Settings:     schema2.Attachment{Type: "VirtualDisk", Path: hostPath},
		}); err != nil {
			vm.freeLUN(lun)
			return nil, fmt.Errorf("attach %s: %w", hostPath, err)
		}
		if err := vm.add(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
			ResourceType: schema2.ResourceTypeMappedVirtualDisk,
			RequestType:  schema2.RequestTypeAdd,
			Settings:     &schema2.MappedVirtualDisk{ContainerPath: d.GuestPath, Lun: uint8(lun)},
		}}); err != nil {
			if derr := vm.detach(ctx, d); derr != nil {
				err = fmt.Errorf("%w (and detaching it again: %v)", err, derr)
			}
			return nil, fmt.Errorf("mount %s in the guest: %w", hostPath, err)
		}
		return d, nil
	})
}

// ReleaseDisk drops a reference to d; the last one unmounts it in the guest, then detaches it
// (hcsshim's order: guest first, then host).
func (vm *VM) ReleaseDisk(ctx context.Context, d *Disk) error {
	_, err := vm.disks.release(d.HostPath, func(d *Disk) error {
		if err := vm.remove(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
			ResourceType: schema2.ResourceTypeMappedVirtualDisk,
			RequestType:  schema2.RequestTypeRemove,
			Settings:     &schema2.MappedVirtualDisk{ContainerPath: d.GuestPath, Lun: uint8(d.LUN)},
		}}); err != nil {
			return err
		}
		return vm.detach(ctx, d)
	})
	return err
}

func (vm *VM) detach(ctx context.Context, d *Disk) error {
	if err := vm.remove(ctx, &schema2.ModifySettingRequest{
		ResourcePath: fmt.Sprintf(schema2.ResourcePathSCSIFormat, SCSIController, d.LUN),
		RequestType:  schema2.RequestTypeRemove,
	}); err != nil {
		return err
	}
	vm.freeLUN(d.LUN)
	return nil
}

// reserveLUN takes the first free LUN and the next guest mount index.
func (vm *VM) reserveLUN() (lun int, mount uint64, err error) {
	vm.counterMu.Lock()
	defer vm.counterMu.Unlock()
	for i, used := range vm.luns {
		if !used {
			vm.luns[i] = true
			mount = vm.nextMount
			vm.nextMount++
			return i, mount, nil
		}
	}
	// hcsshim's scsi.ErrNoAvailableLocation.
	return 0, 0, fmt.Errorf("all %d LUNs of SCSI controller %s are in use: %w", lunsPerController, SCSIController, errdefs.ErrResourceExhausted)
}

func (vm *VM) freeLUN(lun int) {
	vm.counterMu.Lock()
	vm.luns[lun] = false
	vm.counterMu.Unlock()
}

// DiskRefs returns the references held on the disk hostPath (tests, diagnostics).
func (vm *VM) DiskRefs(hostPath string) int { return vm.disks.count(hostPath) }
