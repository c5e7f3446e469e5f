// Package stats holds containerd.runhcs.stats.v1.Statistics, what the io.containerd.runhcs.v1
// shim returns from Stats. The code is generated from stats.proto by hack/proto.sh (make proto);
// do not edit the .pb.go files.
//
// containerd's CRI plugin and ctr decode these messages with hcsshim's package of the same full
// names, so the names and field numbers are hcsshim's. The linux arm of the oneof is the cgroups
// module's io.containerd.cgroups.v1.Metrics Go type, imported rather than copied, so no message is
// registered twice when both are linked into one program.
package stats
