// Package cri is the CRI end-to-end suite of the emulated Windows node (test/winnode, issue 13):
// kubelet's own CRI client (k8s.io/cri-client) drives the Windows build of containerd over its
// named pipe, as a Windows kubelet does. The tests are Windows tests: build them with
// GOOS=windows and run the binary under Wine inside the node (`hack/winnode.sh run cri.test.exe`),
// which gives them RUNHCS_NODE_PIPE and RUNHCS_NODE_REGISTRY; `make test-winnode` does both.
// They also look at the emulated host through the same stand-in DLLs (HCS compute systems, HNS
// endpoints) to check that a removed pod leaves nothing. Without a node they skip, except in CI.
package cri
