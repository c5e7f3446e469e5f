#!/usr/bin/env bash
# hack/wine/containerd.sh runs containerd's own Windows build (containerd.exe and ctr.exe, from
# hack/tools.sh containerd-windows or containerd1.7-windows) under Wine against hcsemu (issue 12;
# the path of issue 13, the emulated Windows node): containerd.exe boots, `ctr.exe image import`
# of the test image unpacks it through hcsshim and the stand-in vmcompute.dll, and
# `ctr.exe run --rm` with the Windows-built shim runs the workload, whose output must reach ctr.
#
#   hack/wine/containerd.sh [windows|wcow] [2|1.7]        (as root: hcsemu mounts overlayfs)
#
# windows (the default) unpacks with containerd's built-in windows snapshotter and differ; wcow
# with this project's snapshotter (its Windows build, containerd-wcow-snapshotter.exe, under Wine
# on a named pipe) configured as containerd.exe's proxy plugins, as docs/install-windows.md
# configures them.
# 2 (the default) is the containerd 2.x pin (tools/go.mod), 1.7 the containerd 1.7 pin
# (tools/containerd1.7/go.mod).
#
# It exits non-zero unless containerd boots, the import succeeds, `ctr run` exits 0 and prints
# the workload's line ("hello from a windows container"), and nothing is left behind: no
# process naming its folder still runs (wineserver -k stops the prefix), and no mount under its
# folder remains. `make test-wine-containerd` runs all four combinations. On success the folder goes
# (RUNHCS_WINE_KEEP=1 keeps it); on failure it stays, with the logs, and is printed.
# containerd must also have deleted the task's bundle (its rootfs unmount goes through the
# stand-in bindfltapi.dll, hack/wine/bindfltapi).
set -uo pipefail
mode="${1:-windows}"
version="${2:-2}"
usage() { echo "usage: $0 [windows|wcow] [2|1.7]" >&2; exit 2; }
case "${mode}" in windows | wcow) ;; *) usage ;; esac
case "${version}" in 2 | 1.7) ;; *) usage ;; esac
want='hello from a windows container'

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}" || exit 1
# shellcheck source=hack/wine/lib.sh
source "${ROOT}/hack/wine/lib.sh"

bash hack/wine/setup.sh || exit 1
if [[ "${version}" == 1.7 ]]; then
	bash hack/tools.sh containerd1.7-windows || exit 1
	containerd_exe="$(bash hack/tools.sh path containerd1.7.exe)" ctr_exe="$(bash hack/tools.sh path ctr1.7.exe)"
else
	bash hack/tools.sh containerd-windows || exit 1
	containerd_exe="$(bash hack/tools.sh path containerd.exe)" ctr_exe="$(bash hack/tools.sh path ctr.exe)"
fi

dir="$(mktemp -d /tmp/runhcs-wine-containerd.XXXXXX)"
echo "containerd.sh: logs in ${dir}" >&2
pids=()
ok=""
stop() {
	local rc=$? left
	for p in "${pids[@]}"; do kill "${p}" 2>/dev/null; done
	[[ -n "${WINESERVER:-}" ]] && "${WINESERVER}" -k 2>/dev/null
	for p in "${pids[@]}"; do wait "${p}" 2>/dev/null; done
	# Nothing that names the folder (Linux or Z: form) may still run: hcsemu's workloads go with
	# it, Wine's processes with the wineserver. A survivor is a defect: say so and fail.
	local procs
	procs="$(pgrep -af -- "$(basename "${dir}")" || true)"
	if [[ -n "${procs}" ]]; then
		echo "containerd.sh: still running after the run:" >&2
		echo "${procs}" >&2
		rc=1
	fi
	# hcsemu unmounts its volumes when it stops; anything still mounted is a defect: say so,
	# then unmount it so that nothing stays behind.
	left="$(awk -v d="${dir}/" 'index($2, d) == 1 {print $2}' /proc/mounts)"
	if [[ -n "${left}" ]]; then
		echo "containerd.sh: left mounted after the run:" >&2
		echo "${left}" >&2
		echo "${left}" | sort -r | xargs -r -n1 umount -l
		rc=1
	fi
	# Everything the emulator made goes with it; the folders with it.
	find "${dir}" -xdev -type c -delete 2>/dev/null
	if [[ -n "${ok}" && "${rc}" == 0 && "${RUNHCS_WINE_KEEP:-}" != 1 ]]; then
		rm -rf "${dir}"
	else
		echo "containerd.sh: logs kept in ${dir}" >&2
	fi
	exit "${rc}"
}
trap stop EXIT

mkdir -p "${dir}/bin" || exit 1
cp "${containerd_exe}" "${dir}/bin/containerd.exe" && cp "${ctr_exe}" "${dir}/bin/ctr.exe" || exit 1
GOOS=windows CGO_ENABLED=0 go build -o "${dir}/bin/containerd-shim-runhcs-v1.exe" ./cmd/containerd-shim-runhcs-v1 &&
	GOOS=windows CGO_ENABLED=0 go build -o "${dir}/bin/containerd-wcow-snapshotter.exe" ./cmd/containerd-wcow-snapshotter &&
	CGO_ENABLED=0 go build -o "${dir}/hcsemu" ./cmd/hcsemu &&
	CGO_ENABLED=0 go build -o "${dir}/workload" ./test/workload &&
	go run ./test/image/cmd/mkimage -o "${dir}/image.tar" -workload "${dir}/workload" || exit 1

"${dir}/hcsemu" --address "${dir}/hcsemu.sock" --root "${dir}/emu" --tcp-address 127.0.0.1:0 \
	--tcp-address-file "${dir}/tcp-address" --tcp-key-file "${dir}/tcp-key" >"${dir}/hcsemu.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "${dir}/tcp-address" ]] && break; sleep 0.1; done
[[ -s "${dir}/tcp-address" ]] || { echo "containerd.sh: hcsemu did not start" >&2; cat "${dir}/hcsemu.log" >&2; exit 1; }
export HCSEMU_TCP_ADDRESS HCSEMU_TCP_KEY_FILE="${dir}/tcp-key"
HCSEMU_TCP_ADDRESS="$(cat "${dir}/tcp-address")"

wine_env
# One user of the prefix at a time (exec.sh and setup.sh hold the same lock).
exec {lockfd}>"${WINE_LOCK}"
flock "${lockfd}"
pipe='\\.\pipe\runhcs-wine-containerd'
win() { echo "Z:${1//\//\\}"; } # a Linux path as Wine's Z: drive shows it
# containerd 1.7 reads configuration version 2; 2.x version 3 (2.x would migrate a 2).
config_version=3
[[ "${version}" == 1.7 ]] && config_version=2
cat >"${dir}/config.toml" <<EOF
version = ${config_version}
root = '$(win "${dir}/ctd/root")'
state = '$(win "${dir}/ctd/state")'
[grpc]
  address = '${pipe}'
EOF
wcow='\\.\pipe\runhcs-wine-wcow'
if [[ "${mode}" == wcow ]]; then
	cat >>"${dir}/config.toml" <<EOF
[proxy_plugins]
  [proxy_plugins.wcow]
    type = "snapshot"
    address = '${wcow}'
    platform = "windows/amd64"
  [proxy_plugins.wcow-diff]
    type = "diff"
    address = '${wcow}'
    platform = "windows/amd64"
[plugins]
  [plugins."io.containerd.service.v1.diff-service"]
    default = ["wcow-diff", "windows"]
  [plugins."io.containerd.transfer.v1.local"]
    [[plugins."io.containerd.transfer.v1.local".unpack_config]]
      platform = "windows/amd64"
      snapshotter = "wcow"
      differ = "wcow-diff"
EOF
	timeout 600 "${WINE64}" "${dir}/bin/containerd-wcow-snapshotter.exe" --address "${wcow}" \
		--root "$(win "${dir}/wcow")" --containerd-address "${pipe}" --log-level debug >"${dir}/snapshotter.log" 2>&1 &
	pids+=($!)
fi
timeout 600 "${WINE64}" "${dir}/bin/containerd.exe" --config "$(win "${dir}/config.toml")" --log-level debug >"${dir}/containerd.log" 2>&1 &
pids+=($!)
ctr() { timeout 120 "${WINE64}" "${dir}/bin/ctr.exe" --address "${pipe}" "$@"; }
booted=""
for _ in $(seq 60); do
	if ctr version >"${dir}/ctr-version.log" 2>&1; then booted=1; break; fi
	sleep 1
done
[[ -n "${booted}" ]] || { echo "containerd.sh: containerd.exe did not answer; see ${dir}/containerd.log" >&2; exit 1; }
echo "containerd.sh: containerd.exe serves on ${pipe}"
# containerd 2.x's ctr imports through the transfer service, which unpacks as unpack_config says;
# 1.7's ctr unpacks itself, with the snapshotter it is given (the differ: diff-service's default).
import_snap=()
[[ "${mode}" == wcow && "${version}" == 1.7 ]] && import_snap=(--snapshotter wcow)
if ! ctr image import "${import_snap[@]}" --platform windows/amd64 "$(win "${dir}/image.tar")"; then
	echo "containerd.sh: ctr.exe image import failed; see ${dir}/containerd.log" >&2
	exit 1
fi
ctr image ls
echo "containerd.sh: ctr.exe run --rm (the Windows-built shim):"
snap=()
[[ "${mode}" == wcow ]] && snap=(--snapshotter wcow)
ctr run --rm "${snap[@]}" --runtime io.containerd.runhcs.v1 docker.io/runhcs/test:latest wine-run | tee "${dir}/run.out"
rc="${PIPESTATUS[0]}"
echo "containerd.sh: ctr.exe run exited ${rc}; what hcsemu did:"
grep -E 'compute system|process (started|exited)|layer (activated|prepared)' "${dir}/hcsemu.log" | sed 's/^/  /'
if [[ "${rc}" != 0 ]]; then
	echo "containerd.sh: FAIL: ctr.exe run exited ${rc}" >&2
	exit 1
fi
if ! grep -qxF "${want}" <(tr -d '\r' <"${dir}/run.out"); then
	echo "containerd.sh: FAIL: ctr.exe run did not print \"${want}\"" >&2
	exit 1
fi
# ctr run --rm has deleted the task's bundle: the rootfs unmount (BfRemoveMapping, the stand-in
# bindfltapi.dll) must have found no binding rather than failed.
if grep -E 'failed to delete (bundle|shim)|removing file binding' "${dir}/containerd.log" >&2; then
	echo "containerd.sh: FAIL: containerd could not delete the task's bundle (above)" >&2
	exit 1
fi
echo "containerd.sh: ok (${mode}, containerd ${version}): ctr.exe run printed the workload's line"
ok=1
