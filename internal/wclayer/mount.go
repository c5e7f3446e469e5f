package wclayer

import "context"

// Mount attaches the storage filter over a chain: the writable scratch layer folder over its
// read-only parents (nearest first, base last) and returns the volume path a container
// document names as Container.Storage.Path. Under Linux it is an overlayfs mount with the
// parents' Files/ as lower directories and scratch/Files as upper directory (scratch/work as
// work directory) at scratch/volume; a scratch folder without Files/ (a view) gets a
// read-only mount of the parents. The mount outlives the caller until Unmount. A second Mount
// of the same scratch returns the same volume path and mounts nothing.
func Mount(ctx context.Context, scratch string, parents []string) (volumePath string, err error) {
	return mount(ctx, scratch, parents)
}

// Unmount detaches the storage filter of scratch; unmounting something not mounted is not an
// error.
func Unmount(ctx context.Context, scratch string) error {
	return unmount(ctx, scratch)
}

// IsMounted reports whether the storage filter is attached over scratch, that is whether a
// container may be using it.
func IsMounted(scratch string) (bool, error) {
	return isMounted(scratch)
}
