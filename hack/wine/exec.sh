#!/usr/bin/env bash
# hack/wine/exec.sh runs a windows/amd64 program under Wine, for `go test -exec`:
#
#   GOOS=windows GOARCH=amd64 go test -exec "$PWD/hack/wine/exec.sh" ./internal/computecore
#
# go test calls it as `exec.sh /path/pkg.test.exe -test.flags…` in the package's folder (Wine
# maps / to Z:, so relative testdata paths work). Every run
#   - makes sure the prefix and the ProcessPrng DLL are there (hack/wine/setup.sh, quick when they are),
#   - holds the prefix's lock, because one wineserver serves a prefix and is stopped afterwards, so
#     two runs in one prefix would stop each other's (go test runs packages in parallel),
#   - is bounded by timeout(1): Wine's failures are often silent hangs. The bound is the test
#     binary's own -test.timeout plus a minute (so Go's timeout panic, with its stacks, comes
#     first), else $RUNHCS_WINE_TIMEOUT seconds (default 600),
#   - stops the wineserver and everything left in the prefix afterwards (wineserver -k).
# The program's exit status is passed through; 124 means the bound was hit.
set -uo pipefail

# shellcheck source=hack/wine/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -lt 1 ]]; then
	echo "usage: exec.sh PROGRAM.exe [ARGS…]" >&2
	exit 2
fi

bash "${WINE_HACK}/setup.sh" || exit 1

# seconds DURATION prints a Go duration (1h2m3.5s, 10m0s, 45s) in whole seconds, rounded up, or
# nothing if it is not one this parser knows (ms, us, ns are below a second: 1).
seconds() {
	local d="$1" total=0 n unit
	[[ "${d}" =~ ^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$ ]] || return 0
	while [[ "${d}" =~ ^([0-9]+)(\.[0-9]+)?(h|ms|m|s|us|µs|ns)(.*)$ ]]; do
		n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[3]}" d="${BASH_REMATCH[4]}"
		[[ -n "${BASH_REMATCH[2]}" ]] && n=$((n + 1))
		case "${unit}" in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		*) total=$((total + 1)) ;;
		esac
	done
	echo "${total}"
}

bound="${RUNHCS_WINE_TIMEOUT:-600}"
for arg in "$@"; do
	if [[ "${arg}" == -test.timeout=* ]]; then
		t="$(seconds "${arg#-test.timeout=}")"
		# -test.timeout=0 disables Go's own bound; ours stays.
		if [[ -n "${t}" && "${t}" -gt 0 ]]; then
			bound=$((t + 60))
		fi
	fi
done

# The stand-in DLLs find hcsemu through HCSEMU_TCP_ADDRESS and authenticate with the key in
# the file HCSEMU_TCP_KEY_FILE names; both pass through to the program with the rest of the
# environment. One without the other is a run that cannot reach the daemon: say so up front.
if [[ -n "${HCSEMU_TCP_ADDRESS:-}" && -z "${HCSEMU_TCP_KEY_FILE:-}" ]]; then
	echo "wine-exec: HCSEMU_TCP_ADDRESS is set without HCSEMU_TCP_KEY_FILE: hcsemu will refuse the stand-in DLLs (see hcsemu --tcp-key-file)" >&2
fi

wine_env
exec {lockfd}>"${WINE_LOCK}"
flock "${lockfd}"

stop_prefix() {
	"${WINESERVER}" -k 2>/dev/null
	# -k only signals; wait (bounded) for the server to be gone so the next run starts afresh.
	timeout 10 "${WINESERVER}" -w 2>/dev/null
}

# Wine runs in the background so that a signal to this script (go test kills the -exec program
# when its own -timeout fires) is handled at once: the prefix is stopped rather than left
# running, and holding the lock, after this script is gone. `<&0` keeps stdin, which a
# background job would otherwise lose to /dev/null.
timeout --kill-after=10 "${bound}" "${WINE64}" "$@" <&0 &
child=$!
trap 'kill -TERM "${child}" 2>/dev/null; stop_prefix; exit 143' TERM INT HUP QUIT
wait "${child}"
status=$?
trap - TERM INT HUP QUIT
stop_prefix
if [[ ${status} -eq 124 || ${status} -eq 137 ]]; then
	echo "wine-exec: $(basename "$1") did not finish within ${bound}s under Wine; stopped" >&2
fi
exit "${status}"
