#!/usr/bin/env bash
# hack/winnode.sh runs an emulated Windows Kubernetes node (test/winnode; docs/winnode.md):
# containerd 2.4.2's (or 1.7.35's) Windows build with its CRI plugin, runhcs's shim and
# snapshotter and win-bridge under Wine, hcsemu as the host's HCS, HNS and storage filter, and a
# loopback registry with the Windows-format test images. As root.
#
#   hack/winnode.sh deps
#   hack/winnode.sh up [--root DIR] [--containerd 2|1.7] [--snapshotter wcow|windows] [--sandboxer podsandbox|shim]
#                      [--pod-subnet CIDR] [--cluster-cidr CIDR]
#   hack/winnode.sh down [--root DIR]
#   hack/winnode.sh run [--root DIR] PROGRAM ARGS…
#   hack/winnode.sh test [--root DIR] [--containerd 2|1.7] [--snapshotter wcow|windows] [--sandboxer podsandbox|shim] [go test flags…]
#   hack/winnode.sh test-kubelet [--root DIR] [--containerd 2|1.7] [KUBELET.EXE]
#   hack/winnode.sh soak [--root DIR] [--snapshotter wcow|windows] [TestSandboxSoak flags…]
#
# deps installs the Debian packages the node needs beyond Wine (hack/wine/setup.sh installs
# Wine's): nftables, whose nft hcsemu runs for the HNS network's NAT and port mappings; up runs
# it first, so on a machine with Go, gcc and apt the node's commands work as the README prints
# them. up builds what is missing (cached in $RUNHCS_CACHE), starts the node and prints its
# environment (also in DIR/node.env). DIR defaults to /tmp/runhcs-winnode. --pod-subnet (default
# 10.250.0.0/24) is the node's HNS network and pod addresses; --cluster-cidr (10.250.0.0/16) holds
# every node's subnet and is not NATed (hack/cluster.sh gives each node of a cluster its own). test brings a node up,
# runs the CRI suite (test/cri, a Windows test binary) in it, checks that down cleans up after a
# crash and spares its caller (test/winnode TestDownAfterCrash, TestDownFromCaller, with the same
# containerd) and takes it down; make test-winnode runs it for both containerd versions.
# --sandboxer shim runs the default handler's pods through containerd 2.x's sandbox API, served by
# the shim (docs/sandbox-api.md). soak brings a node up with --sandboxer shim on containerd 2.4.2
# and runs the shim sandboxer's soak in it (test/cri TestSandboxSoak: pods churned, pods' shims
# SIGKILLed, Hyper-V pods' too, nothing left), under `winnode run --shim-kills`, which does the
# SIGKILLs the test asks for; flags after the options go to the test binary (-soak.pods N,
# -soak.kills N, -soak.hyperv-kills N, -soak.parallel N); make soak runs it.
# test-kubelet brings a node up and runs test/winnode TestKubeletStaticPod in it: kubelet.exe
# (the Windows build of kubelet; by default the pinned one, hack/tools.sh kubelet) standalone, a
# static pod, its node figures, and down.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=hack/apt.sh
source hack/apt.sh

# elapsed T0 prints the seconds since T0 (a `date +%s.%N`), with two decimals.
elapsed() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }'; }

# node_packages installs what the node needs beyond Wine (see deps above).
node_packages() {
	local need=()
	command -v nft >/dev/null || need+=(nftables)
	apt_install winnode "${need[@]}"
}
cmd="${1:-}"
[[ $# -gt 0 ]] && shift
dir=/tmp/runhcs-winnode
containerd=2
sandboxer=podsandbox
args=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--root) dir="$2"; shift 2 ;;
	--containerd) containerd="$2"; args+=("$1" "$2"); shift 2 ;;
	--snapshotter) args+=("$1" "$2"); shift 2 ;;
	--sandboxer) sandboxer="$2"; args+=("$1" "$2"); shift 2 ;;
	--pod-subnet | --cluster-cidr) args+=("$1" "$2"); shift 2 ;;
	*) break ;;
	esac
done
if [[ "${sandboxer}" == shim && "${containerd}" == 1.7 ]]; then
	echo "winnode: --sandboxer shim: containerd 1.7 has no sandbox API; use --containerd 2" >&2
	exit 2
fi
case "${cmd}" in
deps)
	node_packages
	;;
up)
	t0=$(date +%s.%N)
	node_packages
	echo "winnode: building (cached after the first run)" >&2
	# containerd's Windows build of the asked version, as containerd.exe and ctr.exe in bin.
	case "${containerd}" in
	2) bash hack/tools.sh containerd-windows; exes=(containerd.exe ctr.exe) ;;
	1.7) bash hack/tools.sh containerd1.7-windows; exes=(containerd1.7.exe ctr1.7.exe) ;;
	*) echo "winnode: --containerd ${containerd}: want 2 or 1.7" >&2; exit 2 ;;
	esac
	bash hack/wine/setup.sh
	bash hack/tools.sh cni
	mkdir -p "${dir}/bin"
	GOOS=windows CGO_ENABLED=0 go build -o "${dir}/bin/" ./cmd/containerd-shim-runhcs-v1 ./cmd/containerd-wcow-snapshotter
	CGO_ENABLED=0 go build -o "${dir}/bin/" ./cmd/hcsemu ./test/winnode
	CGO_ENABLED=0 go build -o "${dir}/bin/workload" ./test/workload
	# The Windows build, for the image whose programs run on the host (HostProcess containers).
	GOOS=windows CGO_ENABLED=0 go build -o "${dir}/bin/workload.exe" ./test/workload
	cp "$(bash hack/tools.sh path "${exes[0]}")" "${dir}/bin/containerd.exe"
	cp "$(bash hack/tools.sh path "${exes[1]}")" "${dir}/bin/ctr.exe"
	for t in win-bridge.exe host-local.exe; do cp "$(bash hack/tools.sh path "${t}")" "${dir}/bin/"; done
	CGO_ENABLED=0 go build -o "${dir}/bin/wincat" ./test/wincat
	printf 'winnode: %-34s %7.2fs\n' "build" "$(elapsed "${t0}")" >&2
	# shellcheck source=hack/wine/lib.sh
	source hack/wine/lib.sh
	exec "${dir}/bin/winnode" up --root "${dir}" --bin "${dir}/bin" --wine-prefix "${WINE_PREFIX_DIR}" "${args[@]}"
	;;
down)
	[[ -x "${dir}/bin/winnode" ]] || { [[ ! -e "${dir}" ]] && exit 0; go build -o "${dir}/bin/" ./test/winnode; }
	# down removes the folder, its own binary included: run a copy.
	tmp="$(mktemp /tmp/winnode-down.XXXXXX)"
	cp "${dir}/bin/winnode" "${tmp}"
	chmod +x "${tmp}"
	rc=0
	"${tmp}" down --root "${dir}" || rc=$?
	rm -f "${tmp}"
	exit "${rc}"
	;;
test)
	t_test=$(date +%s.%N)
	bash "$0" down --root "${dir}"
	trap 'bash "$0" down --root "${dir}"' EXIT
	bash "$0" up --root "${dir}" "${args[@]}" >/dev/null
	GOOS=windows CGO_ENABLED=0 go test -c -o "${dir}/bin/cri.test.exe" ./test/cri
	t0=$(date +%s.%N)
	rc=0
	"${dir}/bin/winnode" run --root "${dir}" -- "${dir}/bin/cri.test.exe" -test.v -test.count=1 -test.timeout 15m "$@" || rc=$?
	printf 'winnode: %-34s %7.2fs\n' "CRI suite" "$(elapsed "${t0}")" >&2
	# down after a crash of containerd.exe or hcsemu leaves nothing, and kills nothing of a caller
	# that loaded node.env (nodes of their own); deps installs what is missing.
	# shellcheck source=hack/wine/lib.sh
	source hack/wine/lib.sh
	RUNHCS_WINNODE_BIN="${dir}/bin" RUNHCS_WINNODE_PREFIX="${WINE_PREFIX_DIR}" RUNHCS_WINNODE_CONTAINERD="${containerd}" \
		go test -count=1 -v -timeout 20m -run 'TestDownAfterCrash|TestDownFromCaller|TestUpInstallsPackages|TestContainerdConfig|TestPodNetwork|TestDocsConfig|TestServerVersion|TestNodeRegistry|TestMachineEnvironment|TestSandboxAPIDocConfig|TestSandboxerConfig' ./test/winnode || rc=$?
	printf 'winnode: %-34s %7.2fs (exit %d)\n' "test, containerd ${containerd}" "$(elapsed "${t_test}")" "${rc}" >&2
	exit "${rc}"
	;;
test-kubelet)
	if [[ $# -eq 0 ]]; then
		bash hack/tools.sh kubelet
		set -- "$(bash hack/tools.sh path kubelet.exe)"
	fi
	[[ $# -eq 1 && -f "$1" ]] || { echo "usage: $0 test-kubelet [--root DIR] [--containerd 2|1.7] [KUBELET.EXE]" >&2; exit 2; }
	kubelet="$(realpath "$1")"
	t_test=$(date +%s.%N)
	bash "$0" down --root "${dir}"
	trap 'bash "$0" down --root "${dir}"' EXIT
	bash "$0" up --root "${dir}" "${args[@]}" >/dev/null
	rc=0
	RUNHCS_WINNODE_ROOT="${dir}" RUNHCS_WINNODE_KUBELET="${kubelet}" \
		go test -count=1 -v -timeout 30m -run 'TestKubeletStaticPod' ./test/winnode || rc=$?
	printf 'winnode: %-34s %7.2fs (exit %d)\n' "test-kubelet, containerd ${containerd}" "$(elapsed "${t_test}")" "${rc}" >&2
	exit "${rc}"
	;;
soak)
	t_soak=$(date +%s.%N)
	if [[ "${containerd}" != 2 ]]; then
		echo "winnode: soak: the shim sandboxer needs containerd 2 (1.7 has no sandbox API)" >&2
		exit 2
	fi
	bash "$0" down --root "${dir}"
	trap 'bash "$0" down --root "${dir}"' EXIT
	bash "$0" up --root "${dir}" "${args[@]}" --sandboxer shim >/dev/null
	GOOS=windows CGO_ENABLED=0 go test -c -o "${dir}/bin/cri.test.exe" ./test/cri
	rc=0
	"${dir}/bin/winnode" run --root "${dir}" --shim-kills -- "${dir}/bin/cri.test.exe" -test.v -test.count=1 -test.timeout 15m -test.run '^TestSandboxSoak$' -soak "$@" || rc=$?
	printf 'winnode: %-34s %7.2fs (exit %d)\n' "soak, shim sandboxer" "$(elapsed "${t_soak}")" "${rc}" >&2
	exit "${rc}"
	;;
run)
	exec "${dir}/bin/winnode" run --root "${dir}" -- "$@"
	;;
*)
	echo "usage: $0 deps|up|down|run|test|test-kubelet|soak [--root DIR] …" >&2
	exit 2
	;;
esac
