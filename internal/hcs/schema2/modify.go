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
// virtualmachine.go in hcsshim). The …Format ones take fmt arguments.
const (
	// ResourcePathVMMemory takes the new size in MiB as a bare JSON number.
	ResourcePathVMMemory = "VirtualMachine/ComputeTopology/Memory/SizeInMB"
	// ResourcePathVMProcessorLimits takes a ProcessorLimits.
	ResourcePathVMProcessorLimits = "VirtualMachine/ComputeTopology/Processor/Limits"
	// ResourcePathVSMBShares takes a VirtualSmbShare.
	ResourcePathVSMBShares = "VirtualMachine/Devices/VirtualSmb/Shares"
	// ResourcePathPlan9Shares takes a Plan9Share.
	ResourcePathPlan9Shares = "VirtualMachine/Devices/Plan9/Shares"
	// ResourcePathSCSIFormat takes the controller key and the LUN; settings are an Attachment.
	ResourcePathSCSIFormat = "VirtualMachine/Devices/Scsi/%s/Attachments/%d"
	// ResourcePathNetworkAdapterFormat takes the adapter key; settings are a NetworkAdapter.
	ResourcePathNetworkAdapterFormat = "VirtualMachine/Devices/NetworkAdapters/%s"
	// ResourcePathComPortFormat takes the port number; settings are a ComPort.
	ResourcePathComPortFormat = "VirtualMachine/Devices/ComPorts/%d"
	// ResourcePathMappedPipeFormat takes the pipe name; settings are a MappedPipe.
	ResourcePathMappedPipeFormat = "VirtualMachine/Devices/MappedPipes/%s"
	// ResourcePathHvSocketServiceFormat takes the service GUID; settings are an HvSocketServiceConfig.
	ResourcePathHvSocketServiceFormat = "VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/%s"
)
