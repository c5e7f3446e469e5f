// Package options holds containerd.runhcs.v1.Options, the runtime options of the
// io.containerd.runhcs.v1 runtime type, and ProcessDetails, the per-process info of a Pids
// answer. The code is generated from runhcs.proto by hack/proto.sh (make proto); do not edit the
// .pb.go files.
//
// The message names and field numbers are those of Microsoft's hcsshim runhcs options, so that
// containerd's CRI plugin, which reads a runtime handler's `options` table into this type, and
// any client built against hcsshim's package, interoperate with this shim.
package options
