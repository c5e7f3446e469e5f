// Package snapshot implements containerd's snapshots and diff services for Windows layers
// on top of internal/wclayer.
package snapshot
