package uvm

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/oci"
)

// Layout of a base layer's utility VM files (hcsshim's internal/uvmfolder and
// internal/wclayer/legacy.go).
const (
	utilityVMDir = "UtilityVM"
	// bootDevicePath is the boot manager, relative to the VmbFs root (the "os" share).
	bootDevicePath = schema2.UVMBootDevicePath
)

// Options is what a utility VM is made of, already checked: its size comes from
// internal/oci (oci.VMSizing reads the annotations and runtime options), its boot layer from
// FindBootLayer.
type Options struct {
	// ID is the compute system's id: <pod id>@vm (VMID).
	ID    string
	Owner string

	oci.VMSize

	// BootLayer is the uppermost read-only layer folder with a UtilityVM folder; its
	// UtilityVM/Files is shared as "os".
	BootLayer string
	// ScratchDisk is the VM's scratch disk (SCSI 0:0), "" for none.
	ScratchDisk string
}

// VMID is the id of a pod's utility VM, as hcsshim names it (pod.go createPod).
func VMID(podID string) string { return podID + "@vm" }

// FindBootLayer returns the uppermost of parents (nearest first) that has a UtilityVM folder
// with the boot manager in UtilityVM/Files, as hcsshim looks for it
// (internal/uvmfolder/locate.go LocateUVMFolder, which scans the layers top to base).
func FindBootLayer(parents []string) (string, error) {
	for _, p := range parents {
		st, err := os.Stat(filepath.Join(p, utilityVMDir))
		if err != nil || !st.IsDir() {
			continue
		}
		boot := filepath.Join(append([]string{p, utilityVMDir, "Files"}, splitWindows(bootDevicePath)...)...)
		if _, err := os.Stat(boot); err != nil {
			return "", fmt.Errorf("boot layer %s: %s: the utility VM's boot manager is missing: %w", p, boot, errdefs.ErrFailedPrecondition)
		}
		return p, nil
	}
	return "", fmt.Errorf("none of the image's %d layers has a %s folder: a Hyper-V utility VM boots from the uppermost layer with one (a pod's, from its pause image's): %w", len(parents), utilityVMDir, errdefs.ErrFailedPrecondition)
}

// splitWindows splits a Windows relative path (\a\b) into its elements.
func splitWindows(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '\\' {
			if i > start {
				out = append(out, p[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// BootFiles is the folder shared as "os": the boot layer's UtilityVM/Files.
func (o *Options) BootFiles() string { return filepath.Join(o.BootLayer, utilityVMDir, "Files") }

// Document is the VM's HCS document: hcsshim's WCOW document (create_wcow.go prepareCommonConfigDoc
// and prepareConfigDoc; docs/notes/hyperv.md §1), with a GuestConnection, because this shim talks
// to the guest through HCS (docs/architecture.md, "Isolation"; VirtDocs VirtualMachine: "If
// specified, the virtual machine start will wait until a guest connection is established").
func (o *Options) Document() *schema2.ComputeSystem {
	devices := &schema2.Devices{
		Scsi: map[string]schema2.Scsi{SCSIController: {Attachments: map[string]schema2.Attachment{}}},
		HvSocket: &schema2.HvSocket2{HvSocketConfig: &schema2.HvSocketSystemConfig{
			// SYSTEM and Administrators may bind (create_wcow.go).
			DefaultBindSecurityDescriptor: "D:P(A;;FA;;;SY)(A;;FA;;;BA)",
		}},
		VirtualSmb: &schema2.VirtualSmb{
			DirectFileMappingInMB: 1024, // hcsshim: "Sensible default"
			Shares: []schema2.VirtualSmbShare{{
				Name:    schema2.UVMOSShareName,
				Path:    o.BootFiles(),
				Options: readOnlyShareOptions(),
			}},
		},
	}
	if o.ScratchDisk != "" {
		devices.Scsi[SCSIController].Attachments["0"] = schema2.Attachment{Type: "VirtualDisk", Path: o.ScratchDisk}
	}
	return &schema2.ComputeSystem{
		Owner:                             o.Owner,
		SchemaVersion:                     &schema2.SchemaV21,
		ShouldTerminateOnLastHandleClosed: true,
		VirtualMachine: &schema2.VirtualMachine{
			StopOnReset: true,
			Chipset: &schema2.Chipset{Uefi: &schema2.Uefi{BootThis: &schema2.UefiBootEntry{
				DeviceType: schema2.UVMBootDeviceTypeVmbFs,
				DevicePath: bootDevicePath,
			}}},
			ComputeTopology: &schema2.Topology{
				Memory: &schema2.VirtualMachineMemory{
					SizeInMB:             o.MemoryMB,
					AllowOvercommit:      o.AllowOvercommit,
					EnableHotHint:        o.AllowOvercommit,
					EnableDeferredCommit: o.EnableDeferredCommit,
				},
				Processor: &schema2.VirtualMachineProcessor{
					Count:  o.ProcessorCount,
					Limit:  o.ProcessorLimit,
					Weight: o.ProcessorWeight,
				},
			},
			Devices: devices,
			RegistryChanges: &schema2.RegistryChanges{AddValues: []schema2.RegistryValue{{
				// Containers get their own network compartments (create_wcow.go).
				Key:        &schema2.RegistryKey{Hive: "System", Name: `CurrentControlSet\Services\gns`},
				Name:       "EnableCompartmentNamespace",
				Type:       "DWord",
				DWordValue: 1,
			}}},
			GuestConnection: &schema2.GuestConnection{},
		},
	}
}

// readOnlyShareOptions are hcsshim's options for a read-only layer share
// (vsmb.go DefaultVSMBOptions(true) plus TakeBackupPrivilege).
func readOnlyShareOptions() *schema2.VirtualSmbShareOptions {
	return &schema2.VirtualSmbShareOptions{ReadOnly: true, ShareRead: true, CacheIo: true, PseudoOplocks: true, TakeBackupPrivilege: true}
}
