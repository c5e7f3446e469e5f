// Package diag holds the containerd.runhcs.v1.diag.ShimDiag ttrpc service that every shim serves
// next to the task API (goroutine stacks, task listing, exec in the pod's host), its messages and
// the generated ttrpc client and server glue. The code is generated from shimdiag.proto by
// hack/proto.sh (make proto); do not edit the .pb.go files.
//
// The service and message names are those of hcsshim's shimdiag, so diagnostic clients written
// for either shim work with both.
package diag
