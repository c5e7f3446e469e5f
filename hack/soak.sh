#!/usr/bin/env bash
# hack/soak.sh runs the soak and fault suite (test/soak) against containerd 2.x and 1.7, one
# after the other, then, with 2.x, the shim sandboxer's soak on an emulated Windows node
# (hack/winnode.sh soak: containerd 2.4.2's Windows CRI under Wine, which is the only CRI here
# that runs Windows pods), and says how long each took. Root (mounts, cgroups).
#
#   hack/soak.sh            the CI variant (about 2 minutes per containerd version)
#   RUNHCS_SOAK=long hack/soak.sh
#                           the issue's counts: 500 cycles, 100 shim kills, 20 containerd restarts
#                           (the shim sandboxer's: 500 pods, 100 shim kills)
#   RUNHCS_SOAK_SEED=N      repeats the random choices of an earlier run (each run logs its seed)
#   RUNHCS_SOAK_CONTAINERD="2"   only some versions (default "2 1.7")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

timeout=15m
[[ "${RUNHCS_SOAK:-}" == long ]] && timeout=3h

make build
failed=()
for v in ${RUNHCS_SOAK_CONTAINERD:-2 1.7}; do
	tool=containerd
	[[ "${v}" == 1.7 ]] && tool=containerd1.7
	bash hack/tools.sh "${tool}"
	start=${SECONDS}
	echo "soak: containerd ${v}" >&2
	# -v: the figures of each step are t.Logf lines; a failed run adds the daemons' log tails.
	if ! RUNHCS_BIN="${ROOT}/bin" RUNHCS_E2E_CONTAINERD="${v}" go test -count=1 -v -timeout "${timeout}" ./test/soak/...; then
		failed+=("${v}")
	fi
	echo "soak: containerd ${v}: $((SECONDS - start))s" >&2
done
if [[ " ${RUNHCS_SOAK_CONTAINERD:-2 1.7} " == *" 2 "* ]]; then
	start=${SECONDS}
	echo "soak: the shim sandboxer, emulated node, containerd 2" >&2
	counts=()
	[[ "${RUNHCS_SOAK:-}" == long ]] && counts=(-soak.pods 500 -soak.kills 100 -soak.hyperv-kills 20 -test.timeout 2h)
	if ! bash hack/winnode.sh soak --root "$(mktemp -d /tmp/runhcs-winnode-soak.XXXXXX)" "${counts[@]}"; then
		failed+=("2 (shim sandboxer)")
	fi
	echo "soak: the shim sandboxer: $((SECONDS - start))s" >&2
fi
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "soak: FAILED against containerd ${failed[*]}" >&2
	exit 1
fi
