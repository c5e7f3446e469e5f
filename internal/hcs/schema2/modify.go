package schema2

// RequestType is ModifySettingRequest.RequestType.
type RequestType string

const (
	RequestTypeAdd    RequestType = "Add"
	RequestTypeRemove RequestType = "Remove"
	RequestTypeUpdate RequestType = "Update"
)

// ModifySettingRequest is the document passed to HcsModifyComputeSystem: Add, Remove or Update
// the resource at ResourcePath with Settings (whose type depends on the path; see the
// ResourcePath constants). GuestRequest is forwarded to a utility VM's guest service.
type ModifySettingRequest struct {
	ResourcePath string      `json:"ResourcePath,omitempty"`
	RequestType  RequestType `json:"RequestType,omitempty"`
	Settings     any         `json:"Settings,omitempty"`
	GuestRequest any         `json:"GuestRequest,omitempty"`
}

// Resource paths of a process-isolated container (a silo). HCS does not publish these in the
// schema reference; they are the paths hcsshim sends (internal/hcs/resourcepaths/silo.go, used
// by its task update and mount code), which is the record of what vmcompute accepts.
const (
	// ResourcePathContainerProcessor takes a Processor (RequestType Update).
	ResourcePathContainerProcessor = "Container/Processor"
	// ResourcePathContainerMemory takes the new limit in MiB as a bare JSON number (Update).
	ResourcePathContainerMemory = "Container/Memory/SizeInMB"
	// ResourcePathContainerMappedDirectories takes a MappedDirectory (Add or Remove).
	ResourcePathContainerMappedDirectories = "Container/MappedDirectories"
	// ResourcePathContainerMappedPipes takes a MappedPipe (Add or Remove).
	ResourcePathContainerMappedPipes = "Container/MappedPipes"
)

// Resource paths of a utility VM, from the same source (internal/hcs/resourcepaths/
// virtualmachine.go in hcsshim) and Microsoft's table of valid pairs (VirtDocs
// Reference/HcsModifyComputeSystem.md). The …Format ones take fmt arguments. Memory and
// processor-limit requests carry no RequestType (hcsshim sends none).
const (
	// ResourcePathVMMemory takes the new size in MiB as a bare JSON number.
	ResourcePathVMMemory = "VirtualMachine/ComputeTopology/Memory/SizeInMB"
	// ResourcePathVMProcessorLimits takes a ProcessorLimits.
	ResourcePathVMProcessorLimits = "VirtualMachine/ComputeTopology/Processor/Limits"
	// ResourcePathVSMBShares takes a VirtualSmbShare.
	ResourcePathVSMBShares = "VirtualMachine/Devices/VirtualSmb/Shares"
	// ResourcePathPlan9Shares takes a Plan9Share.
	ResourcePathPlan9Shares = "VirtualMachine/Devices/Plan9/Shares"
	// ResourcePathSCSIFormat takes the controller key and the LUN (0-63); Add takes an
	// Attachment, Remove no Settings.
	ResourcePathSCSIFormat = "VirtualMachine/Devices/Scsi/%s/Attachments/%d"
	// ResourcePathNetworkAdapterFormat takes the adapter key; settings are a NetworkAdapter.
	ResourcePathNetworkAdapterFormat = "VirtualMachine/Devices/NetworkAdapters/%s"
	// ResourcePathComPortFormat takes the port number; settings are a ComPort.
	ResourcePathComPortFormat = "VirtualMachine/Devices/ComPorts/%d"
	// ResourcePathMappedPipeFormat takes the host pipe path (\\.\pipe\name); Add and Remove
	// carry no Settings ("Settings should be empty", VirtDocs; hcsshim internal/uvm/pipes.go).
	ResourcePathMappedPipeFormat = "VirtualMachine/Devices/MappedPipes/%s"
	// ResourcePathHvSocketServiceFormat takes the service GUID; settings are an HvSocketServiceConfig.
	ResourcePathHvSocketServiceFormat = "VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/%s"
)

// GuestModifySettingRequest is ModifySettingRequest.GuestRequest: a change inside a utility VM's
// guest, which HCS forwards to the guest compute service over the guest connection (VirtDocs
// GuestModifySettingRequest). Settings depend on ResourceType: a MappedVirtualDisk, a
// CombinedLayers, a MappedDirectory, an HNS namespace (NetworkNamespace) or a
// NetworkModifyRequest (Network).
type GuestModifySettingRequest struct {
	ResourceType ModifyResourceType `json:"ResourceType,omitempty"`
	RequestType  RequestType        `json:"RequestType,omitempty"`
	Settings     any                `json:"Settings,omitempty"`
}

// ModifyResourceType is GuestModifySettingRequest.ResourceType (VirtDocs ModifyResourceType).
type ModifyResourceType string

const (
	ResourceTypeMemory            ModifyResourceType = "Memory"
	ResourceTypeMappedDirectory   ModifyResourceType = "MappedDirectory"
	ResourceTypeMappedPipe        ModifyResourceType = "MappedPipe"
	ResourceTypeMappedVirtualDisk ModifyResourceType = "MappedVirtualDisk"
	ResourceTypeCombinedLayers    ModifyResourceType = "CombinedLayers"
	ResourceTypeNetworkNamespace  ModifyResourceType = "NetworkNamespace"
	ResourceTypeCimMount          ModifyResourceType = "CimMount"
	// ResourceTypeNetwork is a NIC inside the guest, with a NetworkModifyRequest. Microsoft's
	// ModifyResourceType does not list it; hcsshim sends it for WCOW and LCOW NICs
	// (internal/protocol/guestresource ResourceTypeNetwork, internal/uvm/network.go addNIC).
	ResourceTypeNetwork ModifyResourceType = "Network"
)

// Request types of a NetworkModifyRequest: the guest-only PreAdd (carrying the HNS endpoint)
// comes before the host Add of the NIC, whose guest part is an Add (hcsshim addNIC).
const (
	NetworkRequestPreAdd RequestType = "PreAdd"
)

// NetworkModifyRequest is the Settings of a Network guest request (hcsshim's
// guestrequest.NetworkModifyRequest; guests before RS5 took AdapterInstanceId instead):
// AdapterId is the NIC's id (the key of its ResourcePathNetworkAdapterFormat), Settings the
// HNS endpoint for a PreAdd, none otherwise.
type NetworkModifyRequest struct {
	AdapterId   string      `json:"AdapterId,omitempty"`
	RequestType RequestType `json:"RequestType,omitempty"`
	Settings    any         `json:"Settings,omitempty"`
}

// MappedVirtualDisk is the Settings of a MappedVirtualDisk guest request: mount the disk at
// SCSI controller 0, Lun, at the guest path ContainerPath (VirtDocs MappedVirtualDisk; Windows
// guests mount only controller 0's disks, hcsshim internal/uvm/scsi/backend.go).
type MappedVirtualDisk struct {
	ContainerPath string `json:"ContainerPath,omitempty"`
	Lun           uint8  `json:"Lun,omitempty"`
}

// CombinedLayers is the Settings of a CombinedLayers guest request: apply the layer filter at
// the guest path ContainerRootPath (a mounted scratch) with Layers (VSMB share paths, nearest
// first) as its parents. ScratchPath is ignored for Windows (VirtDocs CombinedLayers). hcsshim
// omits a FilterType because the inbox guest service rejects it (microsoft/hcsshim#2714).
type CombinedLayers struct {
	Layers            []Layer `json:"Layers,omitempty"`
	ScratchPath       string  `json:"ScratchPath,omitempty"`
	ContainerRootPath string  `json:"ContainerRootPath,omitempty"`
}
