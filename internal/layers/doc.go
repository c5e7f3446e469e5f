// Package layers mounts a container's layer chain (its scratch layer over its read-only
// parents) and unmounts it, using the storage-filter API of internal/wclayer.
//
// A chain reaches the shim in one of two shapes, both parsed here: the rootfs mounts of a task
// create request (type "windows-layer", Source = the scratch folder, option
// parentLayerPaths=["<top parent>",…,"<base>"], as containerd's windows snapshotter emits them),
// or the OCI spec's Windows.LayerFolders (topmost parent first, base, then the scratch folder).
//
// It imports internal/wclayer and nothing else of runhcs.
package layers
