// Package storage is the emulator's storage filter, vmcompute.dll's layer functions: layers
// activated and prepared as overlayfs volumes named \\?\Volume{GUID}\ (filter_linux.go), the
// scratch disks as emulated VHDX files (volumes.go, on internal/emuvhdx), the layer files'
// functions (layerfiles_linux.go), and ImportLayer and ExportLayer on hcsshim's legacy folders
// of Win32 backup streams (layerimport_linux.go, backupstream.go). A Filter serves its wire
// methods (Methods) and resolves the volume paths compute systems name. It imports the layer
// format (internal/wclayer), internal/emuvhdx and the emulator's leaves (hresult, dispatch,
// wire, layout); never the compute side. docs/emulator.md has the contract.
package storage
