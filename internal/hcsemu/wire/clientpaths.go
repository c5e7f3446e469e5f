package wire

// MethodClientPaths tells the daemon how the client's Windows drive letters map to folders on
// this machine, so that the host paths in the client's HCS documents (a mapped directory's
// HostPath, a VSMB share's Path, a SCSI attachment's Path) resolve. It is a stand-in/emulator
// contract, not a Windows behaviour: on Windows the shim's documents carry real host paths
// that HCS opens as they are. Under Wine the Windows-built shim writes the paths Wine shows it
// (Z:\tmp\…, C:\ProgramData\…), which a Linux daemon cannot open; the stand-in computecore.dll
// (hack/wine) therefore sends this request once, as the first request of a control connection
// (after Authenticate on TCP), with ClientPathsArgs. The daemon answers an empty response,
// then resolves X:\rest in that connection's documents as Wine does: under DosDevices/x:
// (the drive's link in the prefix), and \\?\Volume{GUID}\rest of a volume in Volumes as X:\rest. A connection that sent none (a Linux client, whose paths
// are Linux paths) gets a Windows host path refused with an error naming the field. A second
// ClientPaths on one connection is refused: a connection's mapping does not change.
const MethodClientPaths = "ClientPaths"

// ClientPathsArgs are the args of MethodClientPaths.
type ClientPathsArgs struct {
	// DosDevices is the client's Wine prefix's dosdevices folder (an absolute path whose
	// last element is "dosdevices"), as in LayerArgs.DosDevices.
	DosDevices string `json:"dosDevices"`
	// Volumes maps the client's volume names (\\?\Volume{GUID}\, as
	// GetVolumeNameForVolumeMountPoint returns them for X:\) to their drive letters ("c").
	// containerd's CRI plugin on Windows hands the shim a mount's host path as
	// GetFinalPathNameByHandle names it, on the volume: \\?\Volume{GUID}\rest, which the daemon
	// resolves as X:\rest.
	Volumes map[string]string `json:"volumes,omitempty"`
}
