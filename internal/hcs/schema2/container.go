package schema2

// Container is ComputeSystem.Container: a Windows Server (process-isolated) container, or a
// container hosted in a utility VM when ComputeSystem.HostingSystemId is set.
type Container struct {
	GuestOs           *GuestOs          `json:"GuestOs,omitempty"`
	Storage           *Storage          `json:"Storage,omitempty"`
	MappedDirectories []MappedDirectory `json:"MappedDirectories,omitempty"`
	MappedPipes       []MappedPipe      `json:"MappedPipes,omitempty"`
	Memory            *Memory           `json:"Memory,omitempty"`
	Processor         *Processor        `json:"Processor,omitempty"`
	Networking        *Networking       `json:"Networking,omitempty"`
	HvSocket          *HvSocket         `json:"HvSocket,omitempty"`
	RegistryChanges   *RegistryChanges  `json:"RegistryChanges,omitempty"`
	AssignedDevices   []Device          `json:"AssignedDevices,omitempty"`
	// ContainerCredentialGuard is the state of the CCG instance the container uses (credguard.go).
	ContainerCredentialGuard *ContainerCredentialGuardState `json:"ContainerCredentialGuard,omitempty"`
}

// GuestOs is Container.GuestOs.
type GuestOs struct {
	HostName string `json:"HostName,omitempty"`
}

// Storage is Container.Storage. Path is the volume the storage filter mounted over the layers
// (the container's C:\); Layers are its read-only parents, nearest first.
type Storage struct {
	Layers []Layer     `json:"Layers,omitempty"`
	Path   string      `json:"Path,omitempty"`
	QoS    *StorageQoS `json:"QoS,omitempty"`
}

// Layer is one read-only layer of Storage.Layers. Id is the layer's GUID, Path its folder.
type Layer struct {
	Id       string `json:"Id,omitempty"`
	Path     string `json:"Path,omitempty"`
	PathType string `json:"PathType,omitempty"`
	Cache    string `json:"Cache,omitempty"`
}

// MappedDirectory is a host directory bind-mounted into a container (a volume).
type MappedDirectory struct {
	HostPath      string `json:"HostPath,omitempty"`
	HostPathType  string `json:"HostPathType,omitempty"`
	ContainerPath string `json:"ContainerPath,omitempty"`
	ReadOnly      bool   `json:"ReadOnly,omitempty"`
}

// MappedPipe is a host named pipe mapped into a container.
type MappedPipe struct {
	ContainerPipeName string `json:"ContainerPipeName,omitempty"`
	HostPath          string `json:"HostPath,omitempty"`
	HostPathType      string `json:"HostPathType,omitempty"`
}

// Networking is Container.Networking. Namespace is the HNS namespace GUID.
type Networking struct {
	AllowUnqualifiedDnsQuery   bool     `json:"AllowUnqualifiedDnsQuery,omitempty"`
	DnsSearchList              string   `json:"DnsSearchList,omitempty"`
	NetworkSharedContainerName string   `json:"NetworkSharedContainerName,omitempty"`
	Namespace                  string   `json:"Namespace,omitempty"`
	NetworkAdapters            []string `json:"NetworkAdapters,omitempty"`
}

// Processor is Container.Processor, and the settings of a modify at
// ResourcePathContainerProcessor. Count is a number of logical processors; Maximum is the share
// of host CPU cycles, in hundredths of a percent (1–10000); Weight is the relative weight
// (1–10000). Zero means unset.
type Processor struct {
	Count   uint32 `json:"Count,omitempty"`
	Maximum uint64 `json:"Maximum,omitempty"`
	Weight  uint64 `json:"Weight,omitempty"`
}

// Memory is Container.Memory: the job-object commit limit, in MiB.
type Memory struct {
	SizeInMB uint64 `json:"SizeInMB,omitempty"`
}

// StorageQoS bounds storage I/O: IopsMaximum in I/O operations per second, BandwidthMaximum in
// bytes per second.
type StorageQoS struct {
	IopsMaximum      uint64 `json:"IopsMaximum,omitempty"`
	BandwidthMaximum uint64 `json:"BandwidthMaximum,omitempty"`
}

// HvSocket is Container.HvSocket.
type HvSocket struct {
	Config                 *HvSocketSystemConfig `json:"Config,omitempty"`
	EnablePowerShellDirect bool                  `json:"EnablePowerShellDirect,omitempty"`
}

// RegistryChanges is a set of registry edits applied to a container or VM at creation.
type RegistryChanges struct {
	AddValues  []RegistryValue `json:"AddValues,omitempty"`
	DeleteKeys []RegistryKey   `json:"DeleteKeys,omitempty"`
}

// RegistryKey names a registry key: a hive ("System", "Software", "Security", "Sam") and a path.
type RegistryKey struct {
	Hive     string `json:"Hive,omitempty"`
	Name     string `json:"Name,omitempty"`
	Volatile bool   `json:"Volatile,omitempty"`
}

// RegistryValue is one value of RegistryChanges.AddValues. Type is "String", "ExpandedString",
// "MultiString", "Binary", "DWord", "QWord", "CustomType" or "None".
type RegistryValue struct {
	Key         *RegistryKey `json:"Key,omitempty"`
	Name        string       `json:"Name,omitempty"`
	Type        string       `json:"Type,omitempty"`
	StringValue string       `json:"StringValue,omitempty"`
	BinaryValue string       `json:"BinaryValue,omitempty"`
	DWordValue  int32        `json:"DWordValue,omitempty"`
	QWordValue  int32        `json:"QWordValue,omitempty"`
	CustomType  int32        `json:"CustomType,omitempty"`
}

// Device is an assigned device (Container.AssignedDevices).
type Device struct {
	Type               string `json:"Type,omitempty"`
	InterfaceClassGuid string `json:"InterfaceClassGuid,omitempty"`
	LocationPath       string `json:"LocationPath,omitempty"`
	IdType             string `json:"IdType,omitempty"`
}

// HostedSystem is ComputeSystem.HostedSystem: a container created inside a utility VM, the
// system named by ComputeSystem.HostingSystemId, which must exist and run (VirtDocs
// HostedSystem, ComputeSystem). Its Container names guest paths: Storage.Path is where a
// MappedVirtualDisk guest request mounted the scratch (with CombinedLayers applied there),
// Storage.Layers[].Path are VSMB share paths (VSMBGuestPath), MappedDirectories[].HostPath VSMB
// share paths or guest mount paths, MappedPipes[].HostPath VSMBGuestPipePath of a mapped pipe.
type HostedSystem struct {
	SchemaVersion *Version   `json:"SchemaVersion,omitempty"`
	Container     *Container `json:"Container,omitempty"`
}
