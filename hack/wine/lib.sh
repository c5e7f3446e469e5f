# hack/wine/lib.sh: paths and helpers shared by the Wine scripts (sourced, not run).
#
# Everything Wine needs lives under one cache folder, so a machine's Wine state is private to
# runhcs and can be removed with one rm -rf. Inside it, one folder per version of hack/wine's
# sources (KEY, a hash of every file in hack/wine):
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/KEY/prefix                the Wine prefix (WINEPREFIX)
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/KEY/bcryptprimitives.dll  built from hack/wine/bcryptprimitives.c
#   ${RUNHCS_CACHE:-~/.cache/runhcs}/wine/KEY/lock                  held while the prefix is in use
# The stand-in DLLs are installed into the prefix, so two checkouts whose DLL sources differ (two
# branches tested at once) must not share one: the second's setup would replace the DLLs under the
# first's running tests. Checkouts with the same sources share a prefix and take turns (the lock).
# setup.sh removes the folders of other keys unused for two days.
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the scripts that source this file (setup.sh, exec.sh)
WINE_HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WINE_CACHES="${RUNHCS_CACHE:-${HOME}/.cache/runhcs}/wine"
# wine_sources_key hashes every file under hack/wine except its documentation: names and contents.
wine_sources_key() {
	(cd "${WINE_HACK}" && find . -type f ! -name '*.md' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
		sha256sum | cut -c1-16
}
WINE_CACHE="${WINE_CACHES}/$(wine_sources_key)"
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
