#!/usr/bin/env bash
# hack/bench-shim.sh compares runhcs with containerd's runc shim under the same containerd and
# prints a table of medians and p90s with the ratios runhcs/runc (above 1 means runhcs is slower,
# or bigger): end-to-end latency of create → start → exit of `workload echo x` → delete, by phase;
# exec latency into a running task; and the serving shim's RSS after start.
#
# It runs the compare sub-benchmark of test/bench's BenchmarkShim (see test/bench/doc.go, which
# also lists what differs between the two sides) in the shared test harness, test/harness
# (hcsemu, the wcow snapshotter and the pinned containerd 2.x under a temporary root): $ROUNDS interleaved rounds (default 50,
# about 20 s after the first build). The runc side is containerd-shim-runc-v2 built from the
# containerd pinned in tools/go.mod, into the tools cache as hack/tools.sh builds its tools, and
# Debian's runc (installed with apt-get if missing). Both sides run the same static workload
# binary: runhcs from the Windows-format test image through hcsemu and an overlay of Windows
# layers, runc from a one-layer Linux image through runc and overlayfs.
#
# Needs root. Not part of CI. Usage: hack/bench-shim.sh [rounds]
set -euo pipefail

ROUNDS="${1:-${ROUNDS:-50}}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${RUNHCS_CACHE:-${HOME}/.cache/runhcs}"
GOVER="$(go env GOVERSION)"
# RECIPE names how the shim is built, as in hack/tools.sh: bump it when the flags change.
RECIPE=r1

if [[ "$(id -u)" != 0 ]]; then
	echo "bench-shim: needs root (mounts, chroot, cgroups)" >&2
	exit 1
fi

# runc_shim builds containerd-shim-runc-v2 of the pinned containerd 2.x into the tools cache (once)
# and prints its path.
runc_shim() {
	local v dir
	v="$(cd "${ROOT}/tools" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)"
	dir="${CACHE}/tools/containerd-shim-runc-v2-${v}-${GOVER}-${RECIPE}"
	if [[ ! -x "${dir}/containerd-shim-runc-v2" ]]; then
		echo "bench-shim: building containerd-shim-runc-v2 ${v}" >&2
		mkdir -p "${dir}"
		(cd "${ROOT}/tools" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath \
			-ldflags "-X github.com/containerd/containerd/v2/version.Version=${v}" \
			-o "${dir}/containerd-shim-runc-v2.tmp" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
		mv "${dir}/containerd-shim-runc-v2.tmp" "${dir}/containerd-shim-runc-v2"
	fi
	echo "${dir}/containerd-shim-runc-v2"
}

if ! command -v runc >/dev/null; then
	echo "bench-shim: installing runc (Debian package)" >&2
	apt-get install -y runc >/dev/null || { apt-get update >/dev/null && apt-get install -y runc >/dev/null; }
fi

shim="$(runc_shim)"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-shim.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

cd "${ROOT}"
go test -c -o "${work}/bench.test" ./test/bench
# Run from the checkout: the harness finds the module (and builds the runhcs binaries) from here.
RUNHCS_BENCH_RUNC_SHIM="${shim}" "${work}/bench.test" -test.run '^$' \
	-test.bench '^BenchmarkShim$/^compare$' -test.benchtime "${ROUNDS}x" -test.count 1 -test.timeout 10m
