package uvm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/protocols/options"
)

// Utility VM annotations, spelled as hcsshim publishes them (pkg/annotations in
// Microsoft/hcsshim). They win over the runtime options and spec.windows.resources.
const (
	AnnotationProcessorCount        = "io.microsoft.virtualmachine.computetopology.processor.count"
	AnnotationProcessorLimit        = "io.microsoft.virtualmachine.computetopology.processor.limit"
	AnnotationProcessorWeight       = "io.microsoft.virtualmachine.computetopology.processor.weight"
	AnnotationMemorySizeInMB        = "io.microsoft.virtualmachine.computetopology.memory.sizeinmb"
	AnnotationAllowOvercommit       = "io.microsoft.virtualmachine.computetopology.memory.allowovercommit"
	AnnotationEnableDeferredCommit  = "io.microsoft.virtualmachine.computetopology.memory.enabledeferredcommit"
	AnnotationFullyPhysicallyBacked = "io.microsoft.virtualmachine.fullyphysicallybacked"
)

// Defaults, hcsshim's (internal/uvm/create.go newDefaultOptions; runhcs.proto's comments on
// vm_memory_size_in_mb and vm_processor_count).
const (
	DefaultMemoryMB       = 1024
	DefaultProcessorCount = 2
	// maxProcessorLimit and maxProcessorWeight are the ranges hcsshim documents for the
	// processor annotations (1–100000, where 100000 is 100 %; 0–10000).
	maxProcessorLimit  = 100000
	maxProcessorWeight = 10000
)

// Layout of a base layer's utility VM files (hcsshim's internal/uvmfolder and
// internal/wclayer/legacy.go).
const (
	utilityVMDir = "UtilityVM"
	// bootDevicePath is the boot manager, relative to the VmbFs root (the "os" share).
	bootDevicePath = schema2.UVMBootDevicePath
)

// Options is what a utility VM is made of.
type Options struct {
	// ID is the compute system's id: <pod id>@vm (VMID).
	ID    string
	Owner string

	MemoryMB             uint64
	AllowOvercommit      bool
	EnableDeferredCommit bool
	ProcessorCount       uint32
	ProcessorLimit       uint64
	ProcessorWeight      uint64

	// BootLayer is the uppermost read-only layer folder with a UtilityVM folder; its
	// UtilityVM/Files is shared as "os".
	BootLayer string
	// ScratchDisk is the VM's scratch disk (SCSI 0:0), "" for none.
	ScratchDisk string
}

// VMID is the id of a pod's utility VM, as hcsshim names it (pod.go createPod).
func VMID(podID string) string { return podID + "@vm" }

// NewOptions reads a pod's utility VM from its sandbox spec, the runtime options and the
// host: each size from the annotation, else the runtime option, else spec.windows.resources,
// else hcsshim's default (the options reach hcsshim as annotations filled in where absent,
// internal/oci/uvm.go UpdateSpecFromOptions, so they rank as annotations). Memory is rounded
// up to an even MB and the processor count clamped to hostProcessors (hcsshim's
// vmutils.NormalizeMemorySize and NormalizeProcessorCount). Bad values are refused naming the
// field and the value; hcsshim ignores them with a warning, this shim does not.
func NewOptions(podID, owner string, s *specs.Spec, opts *options.Options, hostProcessors uint32) (*Options, error) {
	o := &Options{ID: VMID(podID), Owner: owner, AllowOvercommit: true}
	a := s.Annotations
	var res *specs.WindowsResources
	if s.Windows != nil {
		res = s.Windows.Resources
	}

	mem, err := pick(a, AnnotationMemorySizeInMB, "runtime options: vm_memory_size_in_mb", int64(opts.GetVmMemorySizeInMb()), func() uint64 {
		if res != nil && res.Memory != nil && res.Memory.Limit != nil && *res.Memory.Limit > 0 {
			return *res.Memory.Limit / (1 << 20)
		}
		return DefaultMemoryMB
	})
	if err != nil {
		return nil, err
	}
	if mem == 0 {
		return nil, fmt.Errorf("utility VM memory: 0 MB (from %s or spec windows.resources.memory.limit): %w", AnnotationMemorySizeInMB, errdefs.ErrInvalidArgument)
	}
	o.MemoryMB = (mem + 1) &^ 1

	count, err := pick(a, AnnotationProcessorCount, "runtime options: vm_processor_count", int64(opts.GetVmProcessorCount()), func() uint64 {
		if res != nil && res.CPU != nil && res.CPU.Count != nil && *res.CPU.Count > 0 {
			return *res.CPU.Count
		}
		return DefaultProcessorCount
	})
	if err != nil {
		return nil, err
	}
	if count == 0 || count > 1<<16 {
		return nil, fmt.Errorf("annotation %s=%d: want 1 to 65536 processors: %w", AnnotationProcessorCount, count, errdefs.ErrInvalidArgument)
	}
	if hostProcessors == 0 {
		return nil, fmt.Errorf("utility VM processors: the host reported 0 logical processors: %w", errdefs.ErrFailedPrecondition)
	}
	o.ProcessorCount = min(uint32(count), hostProcessors)

	if o.ProcessorLimit, err = bounded(a, AnnotationProcessorLimit, 1, maxProcessorLimit); err != nil {
		return nil, err
	}
	if o.ProcessorWeight, err = bounded(a, AnnotationProcessorWeight, 0, maxProcessorWeight); err != nil {
		return nil, err
	}
	if o.AllowOvercommit, err = boolean(a, AnnotationAllowOvercommit, true); err != nil {
		return nil, err
	}
	physical, err := boolean(a, AnnotationFullyPhysicallyBacked, false)
	if err != nil {
		return nil, err
	}
	if physical {
		// hcsshim: "For physical backed memory, set [allowovercommit] to false".
		o.AllowOvercommit = false
	}
	if o.EnableDeferredCommit, err = boolean(a, AnnotationEnableDeferredCommit, false); err != nil {
		return nil, err
	}
	// hcsshim's VerifyOptions: deferred commit needs overcommit.
	if o.EnableDeferredCommit && !o.AllowOvercommit {
		return nil, fmt.Errorf("annotation %s=true needs %s=true (and not %s): %w", AnnotationEnableDeferredCommit, AnnotationAllowOvercommit, AnnotationFullyPhysicallyBacked, errdefs.ErrInvalidArgument)
	}
	return o, nil
}

// pick returns the annotation key, else the runtime option (when positive), else def().
func pick(a map[string]string, key, optName string, opt int64, def func() uint64) (uint64, error) {
	if s, ok := a[key]; ok {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("annotation %s=%q: want a non-negative integer: %w", key, s, errdefs.ErrInvalidArgument)
		}
		return v, nil
	}
	if opt < 0 {
		return 0, fmt.Errorf("%s=%d: must not be negative: %w", optName, opt, errdefs.ErrInvalidArgument)
	}
	if opt > 0 {
		return uint64(opt), nil
	}
	return def(), nil
}

// bounded returns the annotation key within [lo, hi], or 0 (the platform default) if absent.
func bounded(a map[string]string, key string, lo, hi uint64) (uint64, error) {
	s, ok := a[key]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("annotation %s=%q: want an integer from %d to %d: %w", key, s, lo, hi, errdefs.ErrInvalidArgument)
	}
	return v, nil
}

func boolean(a map[string]string, key string, def bool) (bool, error) {
	s, ok := a[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("annotation %s=%q: want true or false: %w", key, s, errdefs.ErrInvalidArgument)
	}
	return v, nil
}

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
