package wclayer

import (
	"context"
	"io"
)

// Layers does this package's work on the host's storage stack: importing and exporting layers
// and attaching the storage filter over a chain. Under the emulator a layer is a folder and the
// filter an overlayfs mount (the package doc); on Windows both go through Microsoft's layer
// APIs (LayerAPI, hcsshim's by default). Make one with New, or on Windows NewWithAPI; a
// Layers is safe for concurrent use and holds no state of its own, so every user may have its
// own.
//
// The methods here are the operations of both platforms; Windows adds the scratch-layer ones
// (scratch_windows.go).

// ImportLayer reads an OCI Windows layer tar from r and makes it the layer folder layer, over
// parents (their folders, nearest first; used to resolve names case-insensitively and written
// to layerchain.json). On error nothing changed: under the emulator the tar is written into a
// new folder beside layer that replaces layer only once the whole tar was read; on Windows an
// existing layer is moved aside and put back (import_windows.go). It returns the number of
// content bytes written. Refused entries and malformed tars give an error wrapping
// errdefs.ErrInvalidArgument that names the entry. r is read through a buffer, so it may be
// read past the end of the tar.
func (l *Layers) ImportLayer(ctx context.Context, r io.Reader, layer string, parents []string, opts ImportOptions) (int64, error) {
	return l.importLayer(ctx, r, layer, parents, opts)
}

// ExportLayer writes layer as an OCI Windows layer tar to w. layer is either an imported (or
// committed) layer folder or a scratch layer. Under the emulator a scratch's Files/ is an
// overlayfs upper directory, so both hold their changes against their parents in the same form
// and the parents are not needed; nodes with stored metadata get their original headers back,
// nodes a container created get headers in the shape backuptar gives them. On Windows the
// parents are those the layer's layerchain.json names.
func (l *Layers) ExportLayer(ctx context.Context, w io.Writer, layer string) error {
	return l.exportLayer(ctx, w, layer)
}

// Mount attaches the storage filter over a chain: the writable scratch layer folder over its
// read-only parents (nearest first, base last) and returns the volume path a container
// document names as Container.Storage.Path. Under Linux it is an overlayfs mount with the
// parents' Files/ as lower directories and scratch/Files as upper directory (scratch/work as
// work directory) at scratch/volume; a scratch folder without Files/ (a view) gets a
// read-only mount of the parents. The mount outlives the caller until Unmount. A second Mount
// of the same scratch returns the same volume path and mounts nothing.
func (l *Layers) Mount(ctx context.Context, scratch string, parents []string) (volumePath string, err error) {
	return l.mount(ctx, scratch, parents)
}

// Unmount detaches the storage filter of scratch; unmounting something not mounted is not an
// error.
func (l *Layers) Unmount(ctx context.Context, scratch string) error {
	return l.unmount(ctx, scratch)
}

// IsMounted reports whether the storage filter is attached over scratch, that is whether a
// container may be using it.
func (l *Layers) IsMounted(scratch string) (bool, error) {
	return l.isMounted(scratch)
}
