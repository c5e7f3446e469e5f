# hack/apt.sh: apt_install, the one way the hack scripts install the Debian packages a step
# needs (sourced, not run). Callers check what is missing themselves (a command, a file) and
# pass only those packages, so a machine that has everything never runs apt.
# shellcheck shell=bash

# apt_install WHO PACKAGE… installs the packages with apt-get as root, quietly and without
# recommended packages; as another user it says what to install and fails. WHO names the
# caller in its messages. Nothing to do without packages.
apt_install() {
	local who="$1"
	shift
	[[ $# -eq 0 ]] && return 0
	if [[ $(id -u) -ne 0 ]]; then
		echo "${who}: need Debian packages $*; run as root or install them" >&2
		return 1
	fi
	echo "${who}: installing $*" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
