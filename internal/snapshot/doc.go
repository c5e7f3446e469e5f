// Package snapshot implements containerd's snapshotter (core/snapshots.Snapshotter) and
// differ (core/diff.Applier and Comparer) for Windows layers, on internal/wclayer, and
// registers both on one gRPC server as containerd's snapshots/v1 and diff/v1 services, for
// containerd proxy_plugins of type "snapshot" and type "diff".
//
// # Snapshots
//
// Snapshot metadata lives in containerd's own bolt metadata store
// (core/snapshots/storage) at <root>/metadata.db; each snapshot is the folder
// <root>/snapshots/<id>, a wclayer layer folder. Prepare and View return exactly the mounts of
// containerd's built-in windows snapshotter (plugins/snapshots/windows in containerd v2.4.2):
// one mount of type "windows-layer", Source the snapshot folder, Options "rw" (Prepare) or
// "ro" (View) followed, when there are parents, by parentLayerPaths=<JSON array of the parent
// folders, nearest first>. So the shim works with either snapshotter.
//
// An active snapshot is a scratch layer: its Files/ is created at Prepare and becomes the
// overlayfs upper directory when the shim mounts it (wclayer.Layers.Mount); beside it
// sandbox.vhdx, as on Windows, is hcsemu's emulated disk whose file system is the folder itself
// (package internal/emuvhdx), which a utility VM attaches on SCSI for a Hyper-V isolated container.
// Committing it keeps the folder as it stands (without the disk), which is then a read-only
// layer. A view has no Files/ and mounts
// read-only. Commit and Remove refuse (errdefs.ErrFailedPrecondition) while the snapshot is
// mounted, that is while a container uses it.
//
// On Windows (scratch_windows.go) a snapshot folder is what containerd's windows snapshotter
// makes instead: nothing for an unpack snapshot (Apply imports into it), sandbox.vhdx (a copy
// of the base layer's blank.vhdx, grown to the size labels) for a scratch, vm\sandbox.vhdx for
// the utility VM scratch label; Commit converts a scratch into a read-only layer and Remove
// deletes with vmcompute's DestroyLayer. Under the emulator (scratch_linux.go) it is as below.
//
// The labels containerd.io/snapshot/windows/rootfs.sizebytes and the deprecated
// containerd.io/snapshot/io.microsoft.container.storage.rootfs.size-gb are validated as
// containerd does (bytes win over GB); a folder scratch has no size to set, so under the
// emulator they are recorded only. containerd.io/snapshot/io.microsoft.vm.storage.scratch
// asks for a utility VM scratch: as containerd, it requires the base layer to have a
// UtilityVM folder, and creates the scratch as the folder vm/ (a scratch layer, with its
// vm/sandbox.vhdx) in the snapshot.
//
// # Differ
//
// Apply imports a layer blob (plain tar, gzip or zstd, read from containerd's content store)
// into the folder of the active snapshot named by a windows-layer mount, and returns the
// digest and size of the uncompressed tar (the diff ID). Compare exports the changes of an
// active snapshot over its parents — or of a committed one, through a view of it, as
// containerd's rootfs.CreateDiff mounts it — as an OCI Windows layer tar (gzip unless asked
// otherwise) into the content store, labelled with its uncompressed digest. Mounts that are not windows-layer mounts, and media types
// it cannot read, give errdefs.ErrNotImplemented, so containerd's diff service moves on to the
// next differ in its list. The content store is containerd's, reached over its content API
// (see cmd/containerd-wcow-snapshotter); the caller's namespace and lease are passed on.
package snapshot
