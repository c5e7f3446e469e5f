#!/usr/bin/env bash
# hack/demo.sh is the README's first command. It builds runhcs (the shim, the snapshotter and
# hcsemu) and a pinned containerd, then starts hcsemu, the snapshotter and a private containerd
# under a temporary root, imports a Windows-format test image, runs it with `ctr run`, prints its
# output and tears everything down. Nothing is left running or mounted, also when interrupted:
# the demo program (test/cmd/demo) cleans up on exit, Ctrl-C and SIGTERM.
#
#   hack/demo.sh [-containerd 1.7] [-show-logs] [-- COMMAND ARGS…]
#   e.g. hack/demo.sh -- 'C:\workload\workload.exe' env PATH
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

if [[ $(id -u) -ne 0 ]]; then
	echo "demo: run as root (sudo hack/demo.sh): the emulator mounts layers and chroots processes" >&2
	exit 1
fi

version=2
for ((i = 1; i <= $#; i++)); do
	if [[ "${!i}" == "-containerd" ]]; then
		j=$((i + 1))
		version="${!j}"
	fi
	[[ "${!i}" == "--" ]] && break
done

echo "demo: building runhcs and containerd ${version} (cached after the first run)" >&2
if [[ "${version}" == "1.7" ]]; then
	bash hack/tools.sh containerd1.7
else
	bash hack/tools.sh containerd
fi
mkdir -p bin
go build -o bin/ ./cmd/containerd-shim-runhcs-v1 ./cmd/containerd-wcow-snapshotter ./cmd/hcsemu
go build -o bin/runhcs-demo ./test/cmd/demo

# exec: the demo program gets the signals directly and is the one that cleans up.
RUNHCS_BIN="${ROOT}/bin" exec "${ROOT}/bin/runhcs-demo" "$@"
