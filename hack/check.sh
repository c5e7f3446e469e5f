#!/usr/bin/env bash
# hack/check.sh is the README's second command and what CI runs (.ci/run): it installs what it
# needs on a Debian machine with Go (hack/deps.sh), then runs every check and every test suite:
#
#   gofmt, go vet (linux, windows/amd64), staticcheck                   hack/lint.sh
#   generated protobuf code equals the committed code                   hack/proto.sh --check
#   the Linux build and the Windows cross builds (amd64, arm64)          make build cross
#   unit tests with the race detector                                    make test
#   every fuzz target for 20 s (RUNHCS_FUZZTIME)                        make fuzz
#   windows/amd64 tests under Wine (the HCS contract suite through the
#   real computecore bindings among them)                                make test-windows
#   containerd 2.x's and 1.7's Windows builds under Wine run the test
#   image with the Windows-built shim (both snapshotters)              make test-wine-containerd
#   the CRI suite (kubelet's CRI client) against an emulated Windows
#   node: containerd 2.4.2's and 1.7.35's Windows builds, their CRI,
#   under Wine, each on a fresh node                                    make test-winnode-2, -1.7
#   the same suite with the shim sandboxer (containerd 2.x's sandbox API) make test-winnode-2-shim
#   kubelet.exe standalone on an emulated node (a static pod, its figures) make test-winnode-kubelet
#   a Kubernetes cluster of two emulated nodes (kubelet.exe, kube-proxy.exe),
#   CoreDNS, test/k8s, 2.x and 1.7                                      make test-cluster
#   end-to-end suites against containerd 2.x and 1.7                     make e2e
#   the soak and fault suite, CI variant, containerd 2.x and 1.7         make soak
#
# Every step runs even if an earlier one failed; the summary names the failed ones and the exit
# status is non-zero if any failed. Needs root for the end-to-end suites.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}" || exit 1

if [[ $(id -u) -ne 0 ]]; then
	echo "check: run as root (sudo hack/check.sh): it installs packages and the end-to-end suites mount and chroot" >&2
	exit 1
fi

failed=()
passed=()
step() { # step NAME COMMAND…
	local name="$1"
	shift
	local start=${SECONDS}
	echo "::: ${name}" >&2
	if "$@"; then
		passed+=("${name}")
		echo "::: ${name}: ok ($((SECONDS - start))s)" >&2
	else
		failed+=("${name}")
		echo "::: ${name}: FAILED ($((SECONDS - start))s)" >&2
	fi
}

step deps bash hack/deps.sh
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "check: could not install dependencies" >&2
	exit 1
fi
step lint bash hack/lint.sh
step proto-check bash hack/proto.sh --check
step build make build
step cross make cross
step unit-tests make test
step fuzz make fuzz
step test-windows make test-windows
step test-wine-containerd make test-wine-containerd
# make test-winnode runs both; one step each says how long each version takes.
step test-winnode-containerd-2 make test-winnode-2
step test-winnode-containerd-1.7 make test-winnode-1.7
# containerd 2.x's sandbox API: pods without a pause container, served by the shim.
step test-winnode-containerd-2-shim make test-winnode-2-shim
# kubelet.exe (the Windows build, hack/tools.sh kubelet) standalone on an emulated node.
step test-winnode-kubelet make test-winnode-kubelet
# The Kubernetes cluster: a Linux control plane and emulated Windows nodes joined, each with
# kubelet.exe and kube-proxy.exe (hack/tools.sh kubernetes builds them once, cached), test/k8s
# through the API server, two Windows nodes, containerd 2.x and 1.7.
step test-cluster-containerd-2 make test-cluster
# kube-proxy runs as a HostProcess DaemonSet on 2.x, as a service of each node on 1.7: both ways
# Windows clusters run it.
step test-cluster-containerd-1.7 env RUNHCS_CLUSTER_CONTAINERD=1.7 RUNHCS_CLUSTER_KUBE_PROXY=process make test-cluster
step e2e-containerd-2 make e2e-2
step e2e-containerd-1.7 make e2e-1.7
step soak make soak

echo "check: steps passed: ${passed[*]:-none}" >&2
[[ ${#failed[@]} -gt 0 ]] && echo "check: steps FAILED: ${failed[*]}" >&2
echo "check: $((${#passed[@]})) of $((${#passed[@]} + ${#failed[@]})) steps passed in ${SECONDS}s"
[[ ${#failed[@]} -eq 0 ]]
