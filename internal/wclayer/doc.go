// Package wclayer owns the Windows layer format as runhcs keeps it: the on-disk layout of a
// layer folder, import and export of OCI Windows layer tars, and the storage-filter API
// (Mount/Unmount) that merges a chain of layers into one volume for a container.
//
// # Layout
//
// A layer folder holds Files/ (the file tree), Hives/ (registry hive deltas), UtilityVM/
// (only in base layers that can boot a utility VM) and layerchain.json (a JSON array of the
// parent layer folders, nearest first), as on Windows. A scratch layer (the writable layer of
// a container) is a folder too under the emulator: its Files/ is the overlayfs upper
// directory, work/ the overlayfs work directory and volume/ the mount point that Mount
// returns. A committed scratch folder is therefore a valid read-only layer as it stands.
//
// # Windows metadata on Linux
//
// OCI Windows layer tars carry Windows metadata in PAX records (MSWINDOWS.fileattr,
// MSWINDOWS.rawsd, MSWINDOWS.mountpoint, LIBARCHIVE.creationtime, MSWINDOWS.xattr.*). Linux
// file systems have nowhere to put them, so every imported node carries one extended
// attribute, trusted.wcow.hdr, holding the JSON of everything in its tar header that the file
// itself cannot hold: the exact tar name (Windows is case-insensitive, the folder keeps one
// spelling), mode, owner, the three times, the tar format and every non-standard PAX record.
// trusted.* was chosen over user.* because it can be set on symlinks and whiteout device
// nodes, and because overlayfs copies it up with the file, so a container's modified file
// keeps its security descriptor and attributes in the scratch layer. trusted.* needs
// CAP_SYS_ADMIN, which overlayfs mounts and whiteout device nodes need anyway.
//
// Deletions use overlayfs's own representation, so a layer folder is directly usable as an
// overlayfs lower directory: a whiteout is a 0/0 character device with the hidden name, an
// opaque directory has trusted.overlay.opaque=y. The tar header of a ".wh." entry is kept on
// the device node, that of a ".wh..wh..opq" entry in trusted.wcow.opq on its directory.
// Directories the tar did not name (created implicitly for a deeper entry) are marked with
// trusted.wcow.implicit and are not exported.
//
// # Import and export
//
// ImportLayer writes a tar into a new folder beside the destination and renames it into place
// only when the whole tar was read without error, so a failed or interrupted import leaves no
// half-written layer. Names are resolved case-insensitively against the entries already
// written and against the parents' folders, as NTFS would: a later entry for the same name
// replaces the earlier one. Hostile tars (.., absolute paths, drive letters, entries outside
// Files/, Hives/, UtilityVM/, links that escape, oversized names or records, unsupported entry
// types) are refused with an error naming the entry, and nothing is written outside the
// temporary folder.
//
// ExportLayer writes a layer folder, or a scratch layer's changes (its overlayfs upper
// directory), back as an OCI Windows layer tar; for an imported layer it reproduces every
// entry of the original tar: name, type, mode, owner, times, PAX records, link target and
// content. Hard links are written after all other entries so that their target precedes them.
//
// Exports are reproducible: made-up headers and those of changed nodes take all their times
// from the modification time, never from access or change times, which reading moves.
//
// Limits: a path must fit Linux's PATH_MAX (4096 bytes, with the layer folder's own path)
// although Windows allows 32767 characters; global PAX headers are skipped; a whiteout keeps
// its header but not content (OCI whiteouts have none); GNU sparse entries are refused.
//
// # Storage filter
//
// Mount and Unmount attach and detach the storage filter over a chain. Under Linux this is
// overlayfs; on Windows it is wcifs (see below).
//
// # On Windows
//
// A layer folder is Microsoft's format, written and read by Microsoft's layer APIs through
// hcsshim, as containerd's windows snapshotter and differ do: ImportLayer checks the tar with
// the emulator importer's rules and hands it, re-encoded, to hcsshim's ociwclayer (BackupWrite,
// hive processing, the blank.vhdx scratch templates of base layers); ExportLayer is
// ociwclayer's export against the parents named in layerchain.json; Mount is
// ActivateLayer + PrepareLayer + GetLayerMountPath of vmcompute, Unmount their reverse, with
// a record of the volume path in the scratch folder because Windows lists no such mounts. The
// Windows-only CreateScratch, CreateUVMScratch, ConvertScratchToLayer and DestroyLayer serve
// the snapshotter. Every call goes through the Layers value's LayerAPI: hcsshim's from New,
// another (a fake in tests) from NewWithAPI.
// Differences from the emulator: a layer is imported in place, not beside and renamed, because
// base layers hold differencing VHDXs whose parent locators carry the folder's absolute path
// (an existing layer is moved aside and restored on failure, a failed import destroyed; a crash
// mid-import leaves a partial, uncommitted folder); NTFS resolves case itself, and hcsshim's
// base layer writer refuses a name written twice where the emulator lets the later entry win;
// ImportOptions.Sync relies on NTFS's own flushing.
//
// The operations are methods of Layers (New), which its users (internal/snapshot, internal/layers)
// hold and pass down; the pure functions of the layout (FilesPath, ReadLayerChain, …) are not.
// This package imports nothing of runhcs.
package wclayer
