// Package rootdir is what the emulated node's program (test/winnode) and the cluster's
// (test/cluster) share about the folder each runs in: the shell environment file it writes for
// users (`export NAME='value'` lines) and reads back for `run`, and, for `down`, finding its
// `serve` process, waiting for a process to go, listing what is mounted under the folder, and
// the mark (NodeMarker) by which a node's processes are found.
//
// It imports nothing of runhcs.
package rootdir
