package wire

// The storage filter's methods: vmcompute.dll's layer functions, as hcsshim's internal/wclayer
// binds them (wclayer.go, zsyscall_windows.go), each named after the function it serves. The
// stand-in vmcompute.dll (hack/wine/vmcompute) sends them; layer folders travel as the Linux
// paths Wine maps the caller's Windows paths to (wine_get_unix_file_name), so the daemon never
// parses a drive letter.
const (
	MethodActivateLayer       = "ActivateLayer"
	MethodDeactivateLayer     = "DeactivateLayer"
	MethodPrepareLayer        = "PrepareLayer"
	MethodUnprepareLayer      = "UnprepareLayer"
	MethodGetLayerMountPath   = "GetLayerMountPath"
	MethodCreateSandboxLayer  = "CreateSandboxLayer"
	MethodExpandSandboxSize   = "ExpandSandboxSize"
	MethodDestroyLayer        = "DestroyLayer"
	MethodLayerExists         = "LayerExists"
	MethodNameToGuid          = "NameToGuid"
	MethodProcessBaseImage    = "ProcessBaseImage"
	MethodProcessUtilityImage = "ProcessUtilityImage"
	MethodGrantVmAccess       = "GrantVmAccess"
	MethodGetBaseImages       = "GetBaseImages"
	MethodCreateLayer         = "CreateLayer"
	MethodCopyLayer           = "CopyLayer"
	MethodImportLayer         = "ImportLayer"
	MethodExportLayer         = "ExportLayer"
)

// LayerArgs are the args of every layer method but NameToGuid and GrantVmAccess: Path is the
// layer folder; Parents the parent layer folders, nearest first (PrepareLayer,
// CreateSandboxLayer, ImportLayer, ExportLayer, CopyLayer's destination in Target); Size the
// new size in bytes (ExpandSandboxSize); Source a folder the call reads or writes besides the
// layer (ImportLayer, ExportLayer).
//
// DosDevices, when set, is the dosdevices folder of the caller's Wine prefix: PrepareLayer and
// GetLayerMountPath then also make the volume they name reachable there, as Wine resolves
// \\?\Volume{GUID}\ through <prefix>/dosdevices/volume{guid}; the link goes when the layer
// is unprepared.
type LayerArgs struct {
	Path       string   `json:"path"`
	Parents    []string `json:"parents,omitempty"`
	Size       uint64   `json:"size,omitempty"`
	Source     string   `json:"source,omitempty"`
	Target     string   `json:"target,omitempty"`
	DosDevices string   `json:"dosDevices,omitempty"`
}

// LayerMountReply is the reply of MethodGetLayerMountPath. Volume says Path is a volume path,
// \\?\Volume{GUID}\ (a layer prepared over parents, or a scratch disk's volume); otherwise Path
// is the layer folder itself, as vmcompute answers for a layer that is a folder (hcsshim,
// getlayermountpath.go), and the client gives it back in the caller's own spelling. An empty
// Path: the layer is not activated.
type LayerMountReply struct {
	Path   string `json:"path"`
	Volume bool   `json:"volume,omitempty"`
}

// LayerExistsReply is the reply of MethodLayerExists.
type LayerExistsReply struct {
	Exists bool `json:"exists"`
}

// NameArgs are the args of MethodNameToGuid.
type NameArgs struct {
	Name string `json:"name"`
}

// GuidReply is the reply of MethodNameToGuid: the GUID in its registry form without braces,
// lower case (8-4-4-4-12 hex digits).
type GuidReply struct {
	GUID string `json:"guid"`
}

// GrantVmAccessArgs are the args of MethodGrantVmAccess: a utility VM's id and a file it is to
// open (a layer's VHDX).
type GrantVmAccessArgs struct {
	VMID string `json:"vmId"`
	Path string `json:"path"`
}

// BaseImagesReply is the reply of MethodGetBaseImages: the JSON document vmcompute's
// GetBaseImages hands back (hcsshim's GetSharedBaseImages returns it as a string).
type BaseImagesReply struct {
	Document string `json:"document"`
}

// The bind filter's methods (bindfltapi.dll's BfSetupFilter and BfRemoveMapping, served by the
// storage filter: hack/wine/bindfltapi).
const (
	MethodBindSetup  = "BindSetup"
	MethodBindRemove = "BindRemove"
)

// BindArgs are the args of MethodBindSetup and MethodBindRemove: Root the virtualization root
// (a Linux path, the caller's Windows path as Wine maps it), Target what appears there (a
// volume path \\?\Volume{GUID}\ of the storage filter, or a Linux folder; BindSetup only),
// ReadOnly the mapping's BINDFLT_FLAG_READ_ONLY_MAPPING.
type BindArgs struct {
	Root     string `json:"root"`
	Target   string `json:"target,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}
