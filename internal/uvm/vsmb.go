package uvm

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// shareKey names a share: one per host folder and read-only flag, as hcsshim keys them
// ("<hostPath>-<readOnly>"); a single-file share also by its file.
type shareKey struct {
	hostPath string
	readOnly bool
	file     string
}

// Share is a VSMB share of the VM.
type Share struct {
	key       shareKey
	Name      string
	HostPath  string
	GuestPath string // the share's path in the guest; for a single file, the file's
}

// AddShare shares the host folder hostPath into the VM, or takes another reference to the
// share that already does. Read-only layer shares use hcsshim's layer options
// (DefaultVSMBOptions(true) and TakeBackupPrivilege); others DefaultVSMBOptions(readOnly).
func (vm *VM) AddShare(ctx context.Context, hostPath string, readOnly, layer bool) (*Share, error) {
	opts := &schema2.VirtualSmbShareOptions{}
	if readOnly {
		opts = readOnlyShareOptions()
		opts.TakeBackupPrivilege = layer
	}
	return vm.addShare(ctx, shareKey{hostPath: hostPath, readOnly: readOnly}, opts, nil)
}

// AddFile shares the single host file hostFile into the VM: its folder is shared with
// RestrictFileAccess and SingleFileMapping and the file as its only allowed file (hcsshim's
// resources_wcow.go setupMounts for a file mount). Each file has its own share: hcsshim grows
// one share's AllowedFiles by Update instead; the guest sees the same file either way.
func (vm *VM) AddFile(ctx context.Context, hostFile string, readOnly bool) (*Share, error) {
	opts := &schema2.VirtualSmbShareOptions{}
	if readOnly {
		opts = readOnlyShareOptions()
	}
	opts.RestrictFileAccess, opts.SingleFileMapping = true, true
	dir, file := filepath.Dir(hostFile), filepath.Base(hostFile)
	return vm.addShare(ctx, shareKey{hostPath: dir, readOnly: readOnly, file: file}, opts, []string{file})
}

func (vm *VM) addShare(ctx context.Context, key shareKey, opts *schema2.VirtualSmbShareOptions, allowed []string) (*Share, error) {
	return vm.shares.acquire(key, func() (*Share, error) {
		vm.counterMu.Lock()
		vm.nextShare++
		name := "s" + strconv.FormatUint(vm.nextShare, 16)
		vm.counterMu.Unlock()
		req := &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathVSMBShares,
			RequestType:  schema2.RequestTypeAdd,
			Settings:     schema2.VirtualSmbShare{Name: name, Path: key.hostPath, Options: opts, AllowedFiles: allowed},
		}
		if err := vm.add(ctx, req); err != nil {
			return nil, fmt.Errorf("share %s into the VM: %w", key.hostPath, err)
		}
		s := &Share{key: key, Name: name, HostPath: key.hostPath, GuestPath: schema2.VSMBGuestPath(name)}
		if key.file != "" {
			s.GuestPath += `\` + key.file
		}
		return s, nil
	})
}

// ReleaseShare drops a reference to s; the last one removes the share.
func (vm *VM) ReleaseShare(ctx context.Context, s *Share) error {
	_, err := vm.shares.release(s.key, func(s *Share) error {
		return vm.remove(ctx, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathVSMBShares,
			RequestType:  schema2.RequestTypeRemove,
			Settings:     schema2.VirtualSmbShare{Name: s.Name},
		})
	})
	return err
}

// ShareRefs returns the references held on the share of hostPath (tests, diagnostics).
func (vm *VM) ShareRefs(hostPath string, readOnly bool) int {
	return vm.shares.count(shareKey{hostPath: hostPath, readOnly: readOnly})
}

// Share shares the host folder hostPath into the VM at guestPath: a VSMB share and a
// MappedDirectory guest request (hcsshim's internal/uvm/share.go, for shimdiag share). The
// share is taken for the VM's lifetime. If the guest refuses, the share is released.
func (vm *VM) Share(ctx context.Context, hostPath, guestPath string, readOnly bool) error {
	if guestPath == "" {
		return fmt.Errorf("share %s into utility VM %s: guest path: empty: %w", hostPath, vm.id, errdefs.ErrInvalidArgument)
	}
	s, err := vm.AddShare(ctx, hostPath, readOnly, false)
	if err != nil {
		return err
	}
	if err := vm.add(ctx, &schema2.ModifySettingRequest{GuestRequest: &schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeMappedDirectory,
		RequestType:  schema2.RequestTypeAdd,
		Settings:     &schema2.MappedDirectory{HostPath: s.GuestPath, ContainerPath: guestPath, ReadOnly: readOnly},
	}}); err != nil {
		if rerr := vm.ReleaseShare(context.WithoutCancel(ctx), s); rerr != nil {
			err = fmt.Errorf("%w (and releasing the share: %v)", err, rerr)
		}
		return fmt.Errorf("map %s at %s in utility VM %s: %w", s.GuestPath, guestPath, vm.id, err)
	}
	return nil
}
