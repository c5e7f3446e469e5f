#!/usr/bin/env bash
# hack/wine/setup.sh prepares this machine to run windows/amd64 Go binaries under Wine, and is
# quick and silent when everything is already there (so the test wrapper calls it every time):
#
#   1. Debian packages wine64 and gcc-mingw-w64-x86-64 (apt-get only if missing; needs root then)
#   2. bcryptprimitives.dll built from hack/wine/bcryptprimitives.c, winecompat.c, winebackup.c,
#      winepipe.c, winespawn.c, winesymlink.c, winesock.c, winepath.c, winejob.c, wineaccount.c, winectrl.c and winemem.c (rebuilt when the source changes)
#   3. a private Wine prefix under ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/KEY/prefix, one per version
#      of hack/wine's sources (lib.sh; about 11 s the first time)
#   3b. powershell.exe (hack/wine/powershell), over Wine's stub in the prefix
#   4. computecore.dll, the stand-in HCS API, vmcompute.dll, the stand-in layer API, HNSCall and
#      the HCS v1 functions of hcsshim's HotAttachEndpoint (over computecore.dll), and
#      computenetwork.dll, the stand-in HCN API, that forward to hcsemu over TCP
#      (hack/wine/computecore/, hack/wine/vmcompute/, hack/wine/computenetwork/, and what they
#      share in hack/wine/common/; see hack/wine/README.md)
#   5. bindfltapi.dll, the stand-in bind filter API, whose mappings hcsemu makes (hack/wine/bindfltapi/)
#   6. pdh.dll, the stand-in performance counters kubelet reads, answered by hcsemu (hack/wine/pdh/);
#      it replaces Wine's own pdh.dll in the prefix
#   7. the DLLs copied into the prefix's drive_c/windows/system32
#
# Why the DLL: Go >= 1.22 on Windows needs ProcessPrng from bcryptprimitives.dll, which Wine 8
# (Debian 12) lacks; see bcryptprimitives.c. It also carries Wine 8 fixes (winecompat.c).
set -euo pipefail

# shellcheck source=hack/wine/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt.sh"

log() { echo "wine-setup: $*" >&2; }

install_packages() {
	local need=()
	[[ -x "${WINE64}" && -x "${WINESERVER}" ]] || need+=(wine64)
	command -v "${MINGW_CC}" >/dev/null || need+=(gcc-mingw-w64-x86-64)
	command -v timeout >/dev/null || need+=(coreutils)
	command -v flock >/dev/null || need+=(util-linux)
	[[ ${#need[@]} -eq 0 ]] && return 0
	apt_install wine-setup "${need[@]}" || return 1
	if [[ ! -x "${WINE64}" || ! -x "${WINESERVER}" ]]; then
		log "wine64 installed but ${WINE64} or ${WINESERVER} is missing"
		return 1
	fi
}

# build_dll NAME SOURCES… [-- LIBS…] compiles a DLL when the cached build is missing or was made
# from other sources (the hash of the sources, headers beside them included, is kept beside it).
build_dll() {
	local name="$1" dll="${WINE_CACHE}/$1"
	shift
	local srcs=() libs=() sum
	while [[ $# -gt 0 && "$1" != "--" ]]; do
		srcs+=("$1")
		shift
	done
	[[ $# -gt 0 ]] && shift && libs=("$@")
	# The sources and every header beside them: a changed header rebuilds the DLL too.
	local headers=()
	mapfile -t headers < <(for s in "${srcs[@]}"; do ls "$(dirname "${s}")"/*.h 2>/dev/null; done | sort -u)
	sum="$(cat "${srcs[@]}" "${headers[@]}" | sha256sum | cut -d' ' -f1)"
	if [[ -f "${dll}" && "$(cat "${dll}.sha256" 2>/dev/null)" == "${sum}" ]]; then
		return 0
	fi
	log "building ${name}"
	"${MINGW_CC}" -O2 -Wall -Wextra -Werror -shared -s -o "${dll}.tmp" "${srcs[@]}" "${libs[@]}"
	mv "${dll}.tmp" "${dll}"
	echo "${sum}" >"${dll}.sha256"
}

make_prefix() {
	# system.reg is written last by wineboot; a prefix without it is a half-made one.
	if [[ -f "${WINE_PREFIX_DIR}/system.reg" ]]; then
		return 0
	fi
	log "creating the Wine prefix ${WINE_PREFIX_DIR}"
	rm -rf "${WINE_PREFIX_DIR}"
	mkdir -p "${WINE_PREFIX_DIR}"
	if ! timeout 180 "${WINE64}" wineboot --init >/dev/null 2>&1; then
		log "wineboot --init failed or timed out"
		"${WINESERVER}" -k 2>/dev/null || true
		rm -rf "${WINE_PREFIX_DIR}"
		return 1
	fi
	# wineboot returns before the wineserver has flushed the registry; -w waits for it to exit.
	timeout 60 "${WINESERVER}" -w || "${WINESERVER}" -k 2>/dev/null || true
	if [[ ! -f "${WINE_PREFIX_DIR}/system.reg" ]]; then
		log "wineboot left no ${WINE_PREFIX_DIR}/system.reg"
		return 1
	fi
}

# volume_links makes Wine open its drives by their volume names. On Windows a volume GUID path
# (\\?\Volume{GUID}\rest) opens like the drive path, and containerd's CRI plugin hands the shim a
# mount's host path in that form (GetFinalPathNameByHandle, VOLUME_NAME_GUID), which the shim
# then opens (a Hyper-V pod's VSMB mounts). Wine 8 names drive X:'s volume
# \\?\Volume{00000000-0000-0000-0000-0000000000XX}\ (XX the letter's code in hex; observed for C:
# in GetFinalPathNameByHandle) but cannot open that name; it resolves a \\?\ device name through
# dosdevices/<name in lower case>, so a link there to the drive makes it open (as hcsemu's
# storage filter does for its volumes). Tested by test/cri TestHyperVPod's mount.
volume_links() {
	local d letter hex
	for d in "${WINE_PREFIX_DIR}"/dosdevices/?:; do
		[[ -L "${d}" ]] || continue
		letter="${d##*/}"
		letter="${letter%:}"
		hex="$(printf '%02x' "'${letter^^}")"
		ln -sfn "${letter}:" "${WINE_PREFIX_DIR}/dosdevices/volume{00000000-0000-0000-0000-0000000000${hex}}"
	done
}

# install_dll NAME copies a built DLL into the prefix's system32, where LoadLibrary's
# LOAD_LIBRARY_SEARCH_SYSTEM32 (Go's runtime, and NewLazySystemDLL) looks.
install_dll() {
	local dst="${WINE_PREFIX_DIR}/drive_c/windows/system32/$1"
	if ! cmp -s "${WINE_CACHE}/$1" "${dst}"; then
		cp "${WINE_CACHE}/$1" "${dst}.tmp"
		mv "${dst}.tmp" "${dst}"
	fi
}

# build_exe NAME PACKAGE: a Windows Go program of this repository into the cache, rebuilt when its
# sources change.
build_exe() {
	local name="$1" pkg="$2" exe="${WINE_CACHE}/$1" sum
	sum="$(cat "${WINE_HACK}/../../${pkg}"/*.go | sha256sum | cut -d' ' -f1)"
	if [[ -f "${exe}" && "$(cat "${exe}.sha256" 2>/dev/null)" == "${sum}" ]]; then
		return 0
	fi
	log "building ${name}"
	(cd "${WINE_HACK}/../.." && GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -o "${exe}.tmp" "./${pkg}")
	mv "${exe}.tmp" "${exe}"
	echo "${sum}" >"${exe}.sha256"
}

# prune_other_keys removes the Wine folders of other source versions (lib.sh) whose lock was last
# taken more than two days ago and is not held now: old branches' prefixes, about 300 MB each.
prune_other_keys() {
	local d fd
	for d in "${WINE_CACHES}"/*/; do
		d="${d%/}"
		[[ "${d}" == "${WINE_CACHE}" || ! -f "${d}/lock" ]] && continue
		[[ -n "$(find "${d}/lock" -mtime +2)" ]] || continue
		exec {fd}<"${d}/lock"
		if flock -n "${fd}"; then
			log "removing ${d}, unused for two days"
			rm -rf "${d}"
		fi
		exec {fd}>&-
	done
}

install_packages
mkdir -p "${WINE_CACHE}"
wine_env
# One setup at a time, and none while a test binary uses the prefix (exec.sh holds the lock).
exec {lockfd}>"${WINE_LOCK}"
flock "${lockfd}"
prune_other_keys
build_dll bcryptprimitives.dll "${WINE_HACK}/bcryptprimitives.c" "${WINE_HACK}/winecompat.c" \
	"${WINE_HACK}/winebackup.c" "${WINE_HACK}/winepipe.c" "${WINE_HACK}/winespawn.c" "${WINE_HACK}/winesymlink.c" \
	"${WINE_HACK}/winesock.c" "${WINE_HACK}/winepath.c" "${WINE_HACK}/winejob.c" "${WINE_HACK}/wineaccount.c" \
	"${WINE_HACK}/winectrl.c" "${WINE_HACK}/winemem.c"
build_dll computecore.dll "${WINE_HACK}/computecore/computecore.c" "${WINE_HACK}/common/json.c" \
	"${WINE_HACK}/common/emu.c" -- -lws2_32
build_dll vmcompute.dll "${WINE_HACK}/vmcompute/layers.c" "${WINE_HACK}/vmcompute/hns.c" "${WINE_HACK}/vmcompute/hcs.c" \
	"${WINE_HACK}/common/json.c" \
	"${WINE_HACK}/common/emu.c" "${WINE_HACK}/common/hcn.c" -- -lws2_32 -lole32
build_dll bindfltapi.dll "${WINE_HACK}/bindfltapi/bindfltapi.c" "${WINE_HACK}/common/json.c" "${WINE_HACK}/common/emu.c" -- -lws2_32
build_dll computenetwork.dll "${WINE_HACK}/computenetwork/computenetwork.c" "${WINE_HACK}/common/json.c" \
	"${WINE_HACK}/common/emu.c" "${WINE_HACK}/common/hcn.c" -- -lws2_32 -lole32
build_dll pdh.dll "${WINE_HACK}/pdh/pdh.c" "${WINE_HACK}/common/json.c" "${WINE_HACK}/common/emu.c" -- -lws2_32
make_prefix
volume_links
install_dll bcryptprimitives.dll
install_dll bindfltapi.dll
install_dll computecore.dll
install_dll vmcompute.dll
install_dll computenetwork.dll
install_dll pdh.dll
# powershell.exe over Wine's stub, where Windows keeps it (on PATH): hack/wine/powershell.
build_exe powershell.exe hack/wine/powershell
ps_dst="${WINE_PREFIX_DIR}/drive_c/windows/system32/WindowsPowerShell/v1.0/powershell.exe"
if ! cmp -s "${WINE_CACHE}/powershell.exe" "${ps_dst}"; then
	mkdir -p "$(dirname "${ps_dst}")"
	cp "${WINE_CACHE}/powershell.exe" "${ps_dst}.tmp"
	mv "${ps_dst}.tmp" "${ps_dst}"
fi
