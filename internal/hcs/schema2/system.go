package schema2

import "time"

// Version is a schema version, as ComputeSystem.SchemaVersion and
// BasicInformation.SupportedSchemaVersions carry it.
type Version struct {
	Major uint32 `json:"Major"`
	Minor uint32 `json:"Minor"`
}

// SchemaV21 is schema version 2.1, the version Windows Server 2019 and later accept and the one
// hcsshim sends for process-isolated containers and utility VMs.
var SchemaV21 = Version{Major: 2, Minor: 1}

// ComputeSystem is the configuration document passed to HcsCreateComputeSystem. Exactly one of
// Container and VirtualMachine is set; a container hosted in a utility VM names it with
// HostingSystemId.
type ComputeSystem struct {
	Owner                             string          `json:"Owner,omitempty"`
	SchemaVersion                     *Version        `json:"SchemaVersion,omitempty"`
	HostingSystemId                   string          `json:"HostingSystemId,omitempty"`
	HostedSystem                      any             `json:"HostedSystem,omitempty"`
	Container                         *Container      `json:"Container,omitempty"`
	VirtualMachine                    *VirtualMachine `json:"VirtualMachine,omitempty"`
	ShouldTerminateOnLastHandleClosed bool            `json:"ShouldTerminateOnLastHandleClosed,omitempty"`
}

// SystemType is the "SystemType" of Properties and SystemQuery.
type SystemType string

const (
	SystemTypeContainer      SystemType = "Container"
	SystemTypeVirtualMachine SystemType = "VirtualMachine"
)

// State is the "State" of Properties. The values are those HCS reports.
type State string

const (
	StateCreated         State = "Created"
	StateRunning         State = "Running"
	StatePaused          State = "Paused"
	StateStopped         State = "Stopped"
	StateSavedAsTemplate State = "SavedAsTemplate"
	StateUnknown         State = "Unknown"
)

// Properties is the document HcsGetComputeSystemProperties returns, and one element of the array
// HcsEnumerateComputeSystems returns. The basic properties (Id … ExitType) are always present;
// Statistics and ProcessList only when a PropertyQuery asked for them.
type Properties struct {
	Id                          string                  `json:"Id,omitempty"`
	SystemType                  SystemType              `json:"SystemType,omitempty"`
	RuntimeOsType               string                  `json:"RuntimeOsType,omitempty"`
	Name                        string                  `json:"Name,omitempty"`
	Owner                       string                  `json:"Owner,omitempty"`
	RuntimeId                   string                  `json:"RuntimeId,omitempty"`
	SystemGUID                  string                  `json:"SystemGUID,omitempty"`
	RuntimeTemplateId           string                  `json:"RuntimeTemplateId,omitempty"`
	State                       State                   `json:"State,omitempty"`
	Stopped                     bool                    `json:"Stopped,omitempty"`
	ExitType                    NotificationType        `json:"ExitType,omitempty"`
	Memory                      *MemoryInformationForVM `json:"Memory,omitempty"`
	Statistics                  *Statistics             `json:"Statistics,omitempty"`
	ProcessList                 []ProcessDetails        `json:"ProcessList,omitempty"`
	TerminateOnLastHandleClosed bool                    `json:"TerminateOnLastHandleClosed,omitempty"`
	HostingSystemId             string                  `json:"HostingSystemId,omitempty"`
	GuestConnectionInfo         *GuestConnectionInfo    `json:"GuestConnectionInfo,omitempty"`
}

// MemoryInformationForVM is Properties.Memory for a virtual machine.
type MemoryInformationForVM struct {
	VirtualNodeCount     uint32    `json:"VirtualNodeCount,omitempty"`
	VirtualMachineMemory *VMMemory `json:"VirtualMachineMemory,omitempty"`
}

// VMMemory is the memory state of a virtual machine, in MemoryInformationForVM.
type VMMemory struct {
	AvailableMemory       int32  `json:"AvailableMemory,omitempty"`
	AvailableMemoryBuffer int32  `json:"AvailableMemoryBuffer,omitempty"`
	ReservedMemory        uint64 `json:"ReservedMemory,omitempty"`
	AssignedMemory        uint64 `json:"AssignedMemory,omitempty"`
	SlpActive             bool   `json:"SlpActive,omitempty"`
	BalancingEnabled      bool   `json:"BalancingEnabled,omitempty"`
	DmOperationInProgress bool   `json:"DmOperationInProgress,omitempty"`
}

// GuestConnectionInfo is what a utility VM's guest service reported when it connected.
type GuestConnectionInfo struct {
	SupportedSchemaVersions  []Version `json:"SupportedSchemaVersions,omitempty"`
	ProtocolVersion          uint32    `json:"ProtocolVersion,omitempty"`
	GuestDefinedCapabilities any       `json:"GuestDefinedCapabilities,omitempty"`
}

// Statistics is Properties.Statistics: runtime accounting of a container or virtual machine.
type Statistics struct {
	Timestamp          time.Time       `json:"Timestamp,omitzero"`
	ContainerStartTime time.Time       `json:"ContainerStartTime,omitzero"`
	Uptime100ns        uint64          `json:"Uptime100ns,omitempty"`
	Processor          *ProcessorStats `json:"Processor,omitempty"`
	Memory             *MemoryStats    `json:"Memory,omitempty"`
	Storage            *StorageStats   `json:"Storage,omitempty"`
}

// ProcessorStats is the CPU accounting of Statistics, in units of 100ns.
type ProcessorStats struct {
	TotalRuntime100ns  uint64 `json:"TotalRuntime100ns,omitempty"`
	RuntimeUser100ns   uint64 `json:"RuntimeUser100ns,omitempty"`
	RuntimeKernel100ns uint64 `json:"RuntimeKernel100ns,omitempty"`
}

// MemoryStats is the memory accounting of Statistics.
type MemoryStats struct {
	MemoryUsageCommitBytes            uint64 `json:"MemoryUsageCommitBytes,omitempty"`
	MemoryUsageCommitPeakBytes        uint64 `json:"MemoryUsageCommitPeakBytes,omitempty"`
	MemoryUsagePrivateWorkingSetBytes uint64 `json:"MemoryUsagePrivateWorkingSetBytes,omitempty"`
}

// StorageStats is the storage accounting of Statistics.
type StorageStats struct {
	ReadCountNormalized  uint64 `json:"ReadCountNormalized,omitempty"`
	ReadSizeBytes        uint64 `json:"ReadSizeBytes,omitempty"`
	WriteCountNormalized uint64 `json:"WriteCountNormalized,omitempty"`
	WriteSizeBytes       uint64 `json:"WriteSizeBytes,omitempty"`
}

// NotificationType is the "ExitType" of SystemExitStatus and Properties.
type NotificationType string

const (
	NotificationNone           NotificationType = "None"
	NotificationGracefulExit   NotificationType = "GracefulExit"
	NotificationForcedExit     NotificationType = "ForcedExit"
	NotificationUnexpectedExit NotificationType = "UnexpectedExit"
	NotificationUnknown        NotificationType = "Unknown"
)

// SystemExitStatus is the event data of an HcsEventSystemExited notification and the result
// document of HcsWaitForComputeSystemExit. Status is an HRESULT (0 for a clean exit).
type SystemExitStatus struct {
	Status   int32            `json:"Status"`
	ExitType NotificationType `json:"ExitType,omitempty"`
}

// SystemQuery is the query document of HcsEnumerateComputeSystems; an empty query matches every
// system. Each non-empty list is a filter; a system matches when it matches every filter.
type SystemQuery struct {
	Ids    []string     `json:"Ids,omitempty"`
	Names  []string     `json:"Names,omitempty"`
	Types  []SystemType `json:"Types,omitempty"`
	Owners []string     `json:"Owners,omitempty"`
}
