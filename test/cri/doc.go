// Package cri is the CRI end-to-end suite of the emulated Windows node (test/winnode, issue 13):
// kubelet's own CRI client (k8s.io/cri-client) drives the Windows build of containerd over its
// named pipe, as a Windows kubelet does. The tests are Windows tests: build them with
// GOOS=windows and run the binary under Wine inside the node (`hack/winnode.sh run cri.test.exe`),
// which gives them RUNHCS_NODE_PIPE and RUNHCS_NODE_REGISTRY; `make test-winnode` does both.
// They also look at the emulated host through the same stand-in DLLs (HCS compute systems, HNS
// endpoints) to check that a removed pod leaves nothing. Without a node they skip, except in CI.
//
// `make test-winnode` runs every test on containerd 2.4.2 and on 1.7.35 (hack/winnode.sh test
// --containerd 2|1.7). A test expects the same behaviour from both. Where containerd 1.7 itself
// behaves differently, the check branches on containerd17(t, n) (from CRI's Version call) with a
// comment citing 1.7's source (v1.7.35's pkg/cri/...), and the 2.x check stays as strict as it
// is; TestRuntimeStatus has an example.
//
// TestSandboxSoak, the shim sandboxer's soak, runs only with -soak, in a --sandboxer shim node
// under `winnode run --shim-kills`, which SIGKILLs the pods' shims it asks for: `hack/winnode.sh
// soak` (run by `make soak`) does both. BenchmarkPodStart compares the sandboxers on such a node.
package cri
