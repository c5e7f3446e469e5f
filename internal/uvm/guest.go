package uvm

// Guest requests: what ModifySettingRequest.GuestRequest carries to a utility VM's guest
// compute service over the HCS-mediated channel (VirtDocs GuestModifySettingRequest and
// ModifyResourceType; hcsshim's internal/protocol/guestresource/resources.go). Field names are
// Microsoft's.

// GuestResourceType is GuestModifySettingRequest.ResourceType.
type GuestResourceType string

const (
	GuestResourceMappedVirtualDisk GuestResourceType = "MappedVirtualDisk"
	GuestResourceCombinedLayers    GuestResourceType = "CombinedLayers"
	GuestResourceMappedDirectory   GuestResourceType = "MappedDirectory"
)

// GuestRequest is a GuestModifySettingRequest.
type GuestRequest struct {
	ResourceType GuestResourceType `json:"ResourceType,omitempty"`
	RequestType  string            `json:"RequestType,omitempty"`
	Settings     any               `json:"Settings,omitempty"`
}

// GuestMappedVirtualDisk mounts SCSI LUN Lun (of controller 0, the only one WCOW uses) at
// ContainerPath in the guest.
type GuestMappedVirtualDisk struct {
	ContainerPath string `json:"ContainerPath,omitempty"`
	Lun           int32  `json:"Lun"`
}

// GuestCombinedLayers combines Layers (VSMB paths, nearest first) over the scratch mounted at
// ContainerRootPath. FilterType is deliberately absent: inbox GCS on Windows Server 2022
// refuses it (hcsshim#2714; combine_layers.go).
type GuestCombinedLayers struct {
	ContainerRootPath string       `json:"ContainerRootPath,omitempty"`
	Layers            []GuestLayer `json:"Layers,omitempty"`
}

// GuestLayer is one layer of GuestCombinedLayers.
type GuestLayer struct {
	Id   string `json:"Id,omitempty"`
	Path string `json:"Path,omitempty"`
}

// GuestMappedDirectory maps HostPath (a VSMB path) to ContainerPath in the guest.
type GuestMappedDirectory struct {
	HostPath      string `json:"HostPath,omitempty"`
	ContainerPath string `json:"ContainerPath,omitempty"`
	ReadOnly      bool   `json:"ReadOnly,omitempty"`
}
