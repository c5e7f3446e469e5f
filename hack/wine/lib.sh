# hack/wine/lib.sh: paths and helpers shared by the Wine scripts (sourced, not run).
#
# Everything Wine needs lives under one cache folder, so a machine's Wine state is private to
# runhcs and can be removed with one rm -rf:
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/prefix                the Wine prefix (WINEPREFIX)
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/bcryptprimitives.dll  built from hack/wine/bcryptprimitives.c
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/lock                  held while the prefix is in use
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the scripts that source this file (setup.sh, exec.sh)
WINE_HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WINE_CACHE="${RUNHCS_CACHE:-${HOME}/.cache/runhcs}/wine"
WINE_PREFIX_DIR="${WINE_CACHE}/prefix"
# shellcheck disable=SC2034 # used by the scripts that source this file (setup.sh, exec.sh)
WINE_LOCK="${WINE_CACHE}/lock"
# Debian's wine64 package installs the 64-bit loader here; /usr/bin/wine (package wine) is only
# a wrapper that would also want the 32-bit half.
WINE64="${WINE64:-/usr/lib/wine/wine64}"
WINESERVER="${WINESERVER:-/usr/lib/wine/wineserver}"
MINGW_CC="${MINGW_CC:-x86_64-w64-mingw32-gcc}"

# wine_env exports what every Wine run here uses: the private prefix, no debug channels (Wine's
# fixme: lines would drown test output), no display (no window may ever open), and no Mono or
# Gecko (their installers would prompt, and nothing here needs .NET or HTML).
wine_env() {
	export WINEPREFIX="${WINE_PREFIX_DIR}"
	export WINEARCH=win64
	export WINEDEBUG=-all
	export DISPLAY=
	export WINEDLLOVERRIDES="mscoree=;mshtml="
}
