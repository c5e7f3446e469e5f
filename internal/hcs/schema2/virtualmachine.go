package schema2

// VirtualMachine is ComputeSystem.VirtualMachine: a utility VM for Hyper-V isolated containers.
type VirtualMachine struct {
	StopOnReset     bool             `json:"StopOnReset,omitempty"`
	Chipset         *Chipset         `json:"Chipset,omitempty"`
	ComputeTopology *Topology        `json:"ComputeTopology,omitempty"`
	Devices         *Devices         `json:"Devices,omitempty"`
	GuestState      *GuestState      `json:"GuestState,omitempty"`
	RegistryChanges *RegistryChanges `json:"RegistryChanges,omitempty"`
	StorageQoS      *StorageQoS      `json:"StorageQoS,omitempty"`
	GuestConnection *GuestConnection `json:"GuestConnection,omitempty"`
}

// Chipset is VirtualMachine.Chipset.
type Chipset struct {
	Uefi              *Uefi              `json:"Uefi,omitempty"`
	IsNumLockDisabled bool               `json:"IsNumLockDisabled,omitempty"`
	UseUtc            bool               `json:"UseUtc,omitempty"`
	LinuxKernelDirect *LinuxKernelDirect `json:"LinuxKernelDirect,omitempty"`
}

// Uefi is Chipset.Uefi: how the VM boots.
type Uefi struct {
	EnableDebugger          bool           `json:"EnableDebugger,omitempty"`
	ApplySecureBootTemplate string         `json:"ApplySecureBootTemplate,omitempty"`
	SecureBootTemplateId    string         `json:"SecureBootTemplateId,omitempty"`
	BootThis                *UefiBootEntry `json:"BootThis,omitempty"`
	Console                 string         `json:"Console,omitempty"`
}

// UefiBootEntry is Uefi.BootThis. DeviceType is "ScsiDrive", "VmbFs", "Network" or "File"
// (VirtDocs UefiBootDevice). A Windows utility VM boots from "VmbFs" with DevicePath
// UVMBootDevicePath: the VmbFs root is the VSMB share named UVMOSShareName (the base layer's
// UtilityVM\Files); hcsshim does not set VmbFsRootPath (internal/uvm/create_wcow.go).
type UefiBootEntry struct {
	DeviceType    string `json:"DeviceType,omitempty"`
	DevicePath    string `json:"DevicePath,omitempty"`
	DiskNumber    uint16 `json:"DiskNumber,omitempty"`
	OptionalData  string `json:"OptionalData,omitempty"`
	VmbFsRootPath string `json:"VmbFsRootPath,omitempty"`
}

// LinuxKernelDirect boots a Linux kernel directly (Chipset.LinuxKernelDirect).
type LinuxKernelDirect struct {
	KernelFilePath string `json:"KernelFilePath,omitempty"`
	InitRdPath     string `json:"InitRdPath,omitempty"`
	KernelCmdLine  string `json:"KernelCmdLine,omitempty"`
}

// Topology is VirtualMachine.ComputeTopology.
type Topology struct {
	Memory    *VirtualMachineMemory    `json:"Memory,omitempty"`
	Processor *VirtualMachineProcessor `json:"Processor,omitempty"`
}

// VirtualMachineMemory is Topology.Memory.
type VirtualMachineMemory struct {
	SizeInMB              uint64 `json:"SizeInMB,omitempty"`
	AllowOvercommit       bool   `json:"AllowOvercommit,omitempty"`
	EnableHotHint         bool   `json:"EnableHotHint,omitempty"`
	EnableColdHint        bool   `json:"EnableColdHint,omitempty"`
	EnableColdDiscardHint bool   `json:"EnableColdDiscardHint,omitempty"`
	EnableDeferredCommit  bool   `json:"EnableDeferredCommit,omitempty"`
	LowMMIOGapInMB        uint64 `json:"LowMmioGapInMB,omitempty"`
	HighMMIOBaseInMB      uint64 `json:"HighMmioBaseInMB,omitempty"`
	HighMMIOGapInMB       uint64 `json:"HighMmioGapInMB,omitempty"`
}

// VirtualMachineProcessor is Topology.Processor. Limit and Weight are as ProcessorLimits.
type VirtualMachineProcessor struct {
	Count       uint32 `json:"Count,omitempty"`
	Limit       uint64 `json:"Limit,omitempty"`
	Weight      uint64 `json:"Weight,omitempty"`
	Reservation uint64 `json:"Reservation,omitempty"`
}

// ProcessorLimits is the settings of a modify at ResourcePathVMProcessorLimits (VirtDocs
// ProcessorLimits; Limit 1-100000 where 100000 is all of each processor, Weight 0-10000, per
// hcsshim pkg/annotations).
type ProcessorLimits struct {
	Limit               uint64 `json:"Limit,omitempty"`
	Weight              uint64 `json:"Weight,omitempty"`
	Reservation         uint64 `json:"Reservation,omitempty"`
	MaximumFrequencyMHz uint32 `json:"MaximumFrequencyMHz,omitempty"`
}

// Devices is VirtualMachine.Devices. Map keys are names chosen by the caller: the SCSI
// controller's GUID or index, the network adapter's endpoint GUID, the COM port number.
type Devices struct {
	ComPorts            map[string]ComPort        `json:"ComPorts,omitempty"`
	Scsi                map[string]Scsi           `json:"Scsi,omitempty"`
	NetworkAdapters     map[string]NetworkAdapter `json:"NetworkAdapters,omitempty"`
	HvSocket            *HvSocket2                `json:"HvSocket,omitempty"`
	VirtualSmb          *VirtualSmb               `json:"VirtualSmb,omitempty"`
	Plan9               *Plan9                    `json:"Plan9,omitempty"`
	GuestCrashReporting *GuestCrashReporting      `json:"GuestCrashReporting,omitempty"`
}

// ComPort is a serial port wired to a host named pipe.
type ComPort struct {
	NamedPipe           string `json:"NamedPipe,omitempty"`
	OptimizeForDebugger bool   `json:"OptimizeForDebugger,omitempty"`
}

// Scsi is one SCSI controller; Attachments are keyed by LUN ("0", "1", …).
type Scsi struct {
	Attachments map[string]Attachment `json:"Attachments,omitempty"`
}

// Attachment is a disk on a SCSI controller, and the settings of a modify at
// ResourcePathSCSIFormat (Add). Type is "VirtualDisk", "Iso", "PassThru" or
// "ExtensibleVirtualDisk" (the last with ExtensibleVirtualDiskType).
type Attachment struct {
	Type        string `json:"Type,omitempty"`
	Path        string `json:"Path,omitempty"`
	CachingMode string `json:"CachingMode,omitempty"`
	ReadOnly    bool   `json:"ReadOnly,omitempty"`
	// ExtensibleVirtualDiskType names the provider of an "ExtensibleVirtualDisk".
	ExtensibleVirtualDiskType string `json:"ExtensibleVirtualDiskType,omitempty"`
}

// NetworkAdapter is a VM NIC bound to an HNS endpoint, and the settings of a modify at
// ResourcePathNetworkAdapterFormat.
type NetworkAdapter struct {
	EndpointId string `json:"EndpointId,omitempty"`
	MacAddress string `json:"MacAddress,omitempty"`
}

// HvSocket2 is Devices.HvSocket.
type HvSocket2 struct {
	HvSocketConfig *HvSocketSystemConfig `json:"HvSocketConfig,omitempty"`
}

// HvSocketSystemConfig is the Hyper-V socket configuration of a container or VM.
type HvSocketSystemConfig struct {
	DefaultBindSecurityDescriptor    string                           `json:"DefaultBindSecurityDescriptor,omitempty"`
	DefaultConnectSecurityDescriptor string                           `json:"DefaultConnectSecurityDescriptor,omitempty"`
	ServiceTable                     map[string]HvSocketServiceConfig `json:"ServiceTable,omitempty"`
}

// HvSocketServiceConfig is one entry of HvSocketSystemConfig.ServiceTable.
type HvSocketServiceConfig struct {
	BindSecurityDescriptor    string `json:"BindSecurityDescriptor,omitempty"`
	ConnectSecurityDescriptor string `json:"ConnectSecurityDescriptor,omitempty"`
	AllowWildcardBinds        bool   `json:"AllowWildcardBinds,omitempty"`
	Disabled                  bool   `json:"Disabled,omitempty"`
}

// VirtualSmb is Devices.VirtualSmb: host folders shared into the VM over VSMB.
type VirtualSmb struct {
	Shares                []VirtualSmbShare `json:"Shares,omitempty"`
	DirectFileMappingInMB int64             `json:"DirectFileMappingInMB,omitempty"`
}

// VirtualSmbShare is one VSMB share, also the settings of a modify at ResourcePathVSMBShares:
// Add (the whole share), Update (only AllowedFiles may change, and only of a share with
// RestrictFileAccess; hcsshim internal/uvm/vsmb.go) and Remove (only Name). Inside the guest the
// share is the folder VSMBGuestPath(Name).
type VirtualSmbShare struct {
	Name         string                  `json:"Name,omitempty"`
	Path         string                  `json:"Path,omitempty"`
	AllowedFiles []string                `json:"AllowedFiles,omitempty"`
	Options      *VirtualSmbShareOptions `json:"Options,omitempty"`
}

// VirtualSmbShareOptions are the options of a VirtualSmbShare.
type VirtualSmbShareOptions struct {
	ReadOnly             bool `json:"ReadOnly,omitempty"`
	ShareRead            bool `json:"ShareRead,omitempty"`
	CacheIo              bool `json:"CacheIo,omitempty"`
	NoOplocks            bool `json:"NoOplocks,omitempty"`
	TakeBackupPrivilege  bool `json:"TakeBackupPrivilege,omitempty"`
	UseShareRootIdentity bool `json:"UseShareRootIdentity,omitempty"`
	NoDirectmap          bool `json:"NoDirectmap,omitempty"`
	NoLocks              bool `json:"NoLocks,omitempty"`
	NoDirnotify          bool `json:"NoDirnotify,omitempty"`
	VmSharedMemory       bool `json:"VmSharedMemory,omitempty"`
	RestrictFileAccess   bool `json:"RestrictFileAccess,omitempty"`
	ForceLevelIIOplocks  bool `json:"ForceLevelIIOplocks,omitempty"`
	ReparseBaseLayer     bool `json:"ReparseBaseLayer,omitempty"`
	PseudoOplocks        bool `json:"PseudoOplocks,omitempty"`
	NonCacheIo           bool `json:"NonCacheIo,omitempty"`
	PseudoDirnotify      bool `json:"PseudoDirnotify,omitempty"`
	SingleFileMapping    bool `json:"SingleFileMapping,omitempty"`
}

// Plan9 is Devices.Plan9 (Linux utility VMs).
type Plan9 struct {
	Shares []Plan9Share `json:"Shares,omitempty"`
}

// Plan9Share is one Plan 9 share.
type Plan9Share struct {
	Name         string   `json:"Name,omitempty"`
	AccessName   string   `json:"AccessName,omitempty"`
	Path         string   `json:"Path,omitempty"`
	Port         int32    `json:"Port,omitempty"`
	Flags        int32    `json:"Flags,omitempty"`
	AllowedFiles []string `json:"AllowedFiles,omitempty"`
}

// GuestCrashReporting configures guest crash dumps.
type GuestCrashReporting struct {
	WindowsCrashSettings *WindowsCrashReporting `json:"WindowsCrashSettings,omitempty"`
}

// WindowsCrashReporting is GuestCrashReporting.WindowsCrashSettings.
type WindowsCrashReporting struct {
	DumpFileName string `json:"DumpFileName,omitempty"`
	MaxDumpSize  int64  `json:"MaxDumpSize,omitempty"`
	DumpType     string `json:"DumpType,omitempty"`
}

// GuestState is VirtualMachine.GuestState.
type GuestState struct {
	GuestStateFilePath   string `json:"GuestStateFilePath,omitempty"`
	RuntimeStateFilePath string `json:"RuntimeStateFilePath,omitempty"`
	ForceTransientState  bool   `json:"ForceTransientState,omitempty"`
}

// GuestConnection is VirtualMachine.GuestConnection: how HCS talks to the guest compute service.
// Its presence (even empty, {}) makes HCS connect to the guest: "the virtual machine start will
// wait until a guest connection is established" (VirtDocs VirtualMachine), and only then can
// HCS create hosted systems in it and forward GuestRequests.
type GuestConnection struct {
	UseVsock            bool `json:"UseVsock,omitempty"`
	UseConnectedSuspend bool `json:"UseConnectedSuspend,omitempty"`
	// UseHostTimeZone is new in schema 2.4.
	UseHostTimeZone bool `json:"UseHostTimeZone,omitempty"`
}

// Facts of Windows utility VMs that the VM document and the guest paths in a hosted container's
// document depend on; they are hcsshim's, which is the record of what HCS and the inbox guest
// service accept.
const (
	// UVMOSShareName is the VSMB share a Windows utility VM boots from (its VmbFs root): the
	// boot layer's UtilityVM\Files (hcsshim internal/uvm/create_wcow.go:prepareConfigDoc).
	UVMOSShareName = "os"
	// UVMBootDevicePath is Uefi.BootThis.DevicePath of a utility VM, relative to the VmbFs root
	// (hcsshim internal/wclayer/legacy.go BootDirRelativePath + "bootmgfw.efi").
	UVMBootDevicePath = `\EFI\Microsoft\Boot\bootmgfw.efi`
	// UVMBootDeviceTypeVmbFs is Uefi.BootThis.DeviceType of a utility VM.
	UVMBootDeviceTypeVmbFs = "VmbFs"
	// VSMBGuestPathPrefix is where the guest sees VSMB shares: share s is
	// VSMBGuestPathPrefix + s (hcsshim internal/uvm/vsmb.go vsmbSharePrefix).
	VSMBGuestPathPrefix = `\\?\VMSMB\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\`
	// SCSILUNsPerController is how many LUNs ("0".."63") a SCSI controller of a utility VM
	// has: "fixed by Hyper-V" (hcsshim internal/uvm/start.go).
	SCSILUNsPerController = 64
)

// VSMBGuestPath is the path inside a utility VM of the VSMB share named name.
func VSMBGuestPath(name string) string { return VSMBGuestPathPrefix + name }

// VSMBGuestPipePath is the path inside a utility VM of a host pipe mapped with a modify at
// ResourcePathMappedPipeFormat: the IPC$ share of VSMB (hcsshim internal/uvm/pipes.go), the
// HostPath of the hosted container's MappedPipe.
func VSMBGuestPipePath(pipeName string) string { return VSMBGuestPathPrefix + `IPC$\` + pipeName }
