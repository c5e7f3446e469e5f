#!/usr/bin/env bash
# hack/wine/test.sh is `make test-windows`: the windows/amd64 tests of every package that has
# Windows code (a *_windows.go or *_windows_test.go file), built here and run under Wine through
# hack/wine/exec.sh, then a count of the tests that ran under Wine.
#
#   hack/wine/test.sh [PACKAGE…]      default: every package with Windows code
#
# As root it also runs hcsemu with a loopback TCP listener (--tcp-address, with its key in
# --tcp-key-file, which HCSEMU_TCP_KEY_FILE gives the stand-in DLLs), so that the internal/hcs
# and internal/hns contract suites drive the emulator through the real computecore and
# computenetwork bindings and the stand-in DLLs (hcsemu's HNS needs root: it makes network
# namespaces).
#
# Environment: RUNHCS_WINE_TEST_TIMEOUT (go test -timeout per package, default 3m: a
# package runs in seconds under Wine, and a hang must not cost more), RUNHCS_WINE_RUN and
# RUNHCS_WINE_SKIP (go test -run / -skip). Output: each package's result line, the full output
# of failed packages, and a closing "test-windows: N passed, N failed, N skipped" (tests and
# subtests). The full verbose log is kept in ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/test-windows.log.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}" || exit 1
# shellcheck source=hack/wine/lib.sh
source "${ROOT}/hack/wine/lib.sh"

bash "${ROOT}/hack/wine/setup.sh" || exit 1

# The emulator, for tests that go through the real bindings and the stand-in computecore.dll
# (the internal/hcs contract suite): hcsemu on a temporary unix socket and on a loopback port of
# its choosing (which it writes to tcp-address once ready), and a test image folder with the
# Linux workload (hcsemu runs processes on Linux). It needs root, like hcsemu; without root
# those tests skip (fail in CI).
emu_dir=""
stop_emulator() {
	[[ -n "${emu_dir}" ]] || return 0
	if [[ -n "${hcsemu_pid:-}" ]]; then
		kill -INT "${hcsemu_pid}" 2>/dev/null
		for _ in $(seq 100); do kill -0 "${hcsemu_pid}" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "${hcsemu_pid}" 2>/dev/null
		wait "${hcsemu_pid}" 2>/dev/null
	fi
	rm -rf "${emu_dir}"
	emu_dir=""
}
start_emulator() {
	emu_dir="$(mktemp -d /tmp/runhcs-wine-emu.XXXXXX)"
	CGO_ENABLED=0 go build -o "${emu_dir}/hcsemu" ./cmd/hcsemu &&
		mkdir -p "${emu_dir}/image/workload" "${emu_dir}/image/Windows/System32" &&
		CGO_ENABLED=0 go build -o "${emu_dir}/image/workload/workload.exe" ./test/workload &&
		cp "${emu_dir}/image/workload/workload.exe" "${emu_dir}/image/Windows/System32/workload.exe" || return 1
	# The pinned CNI plugins (win-bridge and its IPAM), which internal/hns runs under Wine against
	# the emulator's HNS as containerd would: one folder, CNI_PATH.
	bash "${ROOT}/hack/tools.sh" cni && mkdir -p "${emu_dir}/cni" &&
		cp "$(bash "${ROOT}/hack/tools.sh" path win-bridge.exe)" "$(bash "${ROOT}/hack/tools.sh" path host-local.exe)" \
			"${emu_dir}/cni/" || return 1
	"${emu_dir}/hcsemu" --address "${emu_dir}/hcsemu.sock" --root "${emu_dir}/state" \
		--tcp-address 127.0.0.1:0 --tcp-address-file "${emu_dir}/tcp-address" \
		--tcp-key-file "${emu_dir}/tcp-key" >"${emu_dir}/hcsemu.log" 2>&1 &
	hcsemu_pid=$!
	# hcsemu writes the address file last, once it serves both transports.
	for _ in $(seq 300); do
		[[ -s "${emu_dir}/tcp-address" ]] && break
		kill -0 "${hcsemu_pid}" 2>/dev/null || break
		sleep 0.1
	done
	if [[ ! -s "${emu_dir}/tcp-address" ]]; then
		echo "test-windows: the emulator did not start; hcsemu's log:" >&2
		cat "${emu_dir}/hcsemu.log" >&2
		return 1
	fi
	# Wine passes the environment on to the Windows test binaries. The stand-in DLLs present
	# the key in HCSEMU_TCP_KEY_FILE (this Linux path; they reach it through Wine's Z:) on every
	# connection: hcsemu serves no TCP client without it.
	# RUNHCS_WINE_HCSEMU and its root: for tests that run a Linux program in the emulated host's
	# network namespace (hcsemu hostns), which Wine starts as a native process.
	export HCSEMU_TCP_ADDRESS HCSEMU_TCP_KEY_FILE RUNHCS_WINE_IMAGE RUNHCS_WINE_CNI_PATH RUNHCS_WINE_HCSEMU RUNHCS_WINE_HCSEMU_ROOT
	HCSEMU_TCP_ADDRESS="$(cat "${emu_dir}/tcp-address")"
	HCSEMU_TCP_KEY_FILE="${emu_dir}/tcp-key"
	RUNHCS_WINE_IMAGE="${emu_dir}/image"
	RUNHCS_WINE_CNI_PATH="${emu_dir}/cni"
	# The same file under a name with a PATHEXT extension, which Go's os/exec needs on Windows.
	ln -f "${emu_dir}/hcsemu" "${emu_dir}/hcsemu.exe" || return 1
	RUNHCS_WINE_HCSEMU="${emu_dir}/hcsemu.exe"
	RUNHCS_WINE_HCSEMU_ROOT="${emu_dir}/state"
	echo "test-windows: hcsemu serving on ${HCSEMU_TCP_ADDRESS}" >&2
}
trap stop_emulator EXIT
trap 'exit 130' INT TERM
if [[ $(id -u) -eq 0 ]]; then
	if ! start_emulator; then
		stop_emulator
		[[ "${CI:-}" == "true" ]] && exit 1
	fi
else
	echo "test-windows: not root: tests against hcsemu will skip" >&2
fi

export GOOS=windows GOARCH=amd64
if [[ $# -gt 0 ]]; then
	pkgs=("$@")
else
	# go list with GOOS=windows: the files the Windows build compiles, tests included.
	mapfile -t pkgs < <(go list -f '{{.ImportPath}}{{range .GoFiles}} {{.}}{{end}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' ./... |
		awk '/_windows(_test)?\.go/ { print $1 }' |
		# The CRI suite runs inside an emulated Windows node, not on its own: make test-winnode.
		grep -v '/test/cri$')
fi
if [[ ${#pkgs[@]} -eq 0 ]]; then
	echo "test-windows: no package has Windows code" >&2
	exit 1
fi

flags=(-count=1 -v -timeout "${RUNHCS_WINE_TEST_TIMEOUT:-3m}" -exec "${ROOT}/hack/wine/exec.sh")
[[ -n "${RUNHCS_WINE_RUN:-}" ]] && flags+=(-run "${RUNHCS_WINE_RUN}")
[[ -n "${RUNHCS_WINE_SKIP:-}" ]] && flags+=(-skip "${RUNHCS_WINE_SKIP}")

log="${WINE_CACHE}/test-windows.log"
echo "test-windows: ${#pkgs[@]} packages under Wine ($("${WINE64}" --version 2>/dev/null)): ${pkgs[*]#github.com/openhcs/runhcs/}" >&2
go test "${flags[@]}" "${pkgs[@]}" >"${log}" 2>&1
status=$?

# go test prints each package's output in one piece, closed by "ok|FAIL|?<TAB>package…": print
# that line, and the piece before it when the package failed.
awk '
	/^(ok|FAIL|\?) *\t/ { if ($1 == "FAIL") printf "%s", block; print; block = ""; next }
	{ block = block $0 "\n" }
	END { printf "%s", block }
' "${log}"

# Not anchored at the line's start: a Windows child process (win-bridge.exe) that Wine tears down
# can leave "wine client error:…: " on the inherited Unix stderr without a newline (observed,
# Wine 8), and the test's next result line then follows it.
read -r passed failed skipped < <(awk '
	/--- PASS: / { p++ } /--- FAIL: / { f++ } /--- SKIP: / { s++ }
	END { print p + 0, f + 0, s + 0 }
' "${log}")
echo "test-windows: full log in ${log}" >&2
if [[ ${status} -ne 0 && ${failed} -eq 0 ]]; then
	# A build failure, a panic or a hang kills a package without a --- FAIL line.
	failed=1
fi
echo "test-windows: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "${status}"
