// Package layers mounts a container's layer chain (its scratch layer over its read-only
// parents) and unmounts it, using the storage-filter API of internal/wclayer.
package layers
