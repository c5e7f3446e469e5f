#!/usr/bin/env bash
# hack/deps.sh installs what building and testing runhcs needs on a Debian machine that has Go,
# and is quick when everything is already there:
#   - Debian packages: protoc (pinned), gcc and libc headers (the race detector needs cgo), make,
#     git, shellcheck (hack/lint.sh)
#   - the pinned Go tools (hack/tools.sh): protoc-gen-go, protoc-gen-go-ttrpc, staticcheck,
#     containerd 2.x and 1.7 with their ctr, built from the Go module proxy into a cache
#
#   hack/deps.sh [--minimal]   --minimal: only what the demo needs (containerd 2.x), no apt
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# protoc's version is written into generated code, so it is pinned (hack/proto.sh checks it).
PROTOC_DEB_VERSION="3.21.12-3+deb12u1"

if ! command -v go >/dev/null; then
	echo "deps: Go is required (https://go.dev/dl/); go.mod says which version" >&2
	exit 1
fi

if [[ "${1:-}" == "--minimal" ]]; then
	bash "${ROOT}/hack/tools.sh" containerd
	exit 0
fi

need=()
if ! command -v protoc >/dev/null || [[ "$(protoc --version)" != "libprotoc ${PROTOC_DEB_VERSION%%-*}" ]]; then
	need+=("protobuf-compiler=${PROTOC_DEB_VERSION}" "libprotobuf-dev=${PROTOC_DEB_VERSION}")
fi
if [[ ! -e /usr/include/google/protobuf/timestamp.proto && ! " ${need[*]} " =~ " libprotobuf-dev=" ]]; then
	need+=("libprotobuf-dev=${PROTOC_DEB_VERSION}")
fi
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
command -v git >/dev/null || need+=(git)
command -v shellcheck >/dev/null || need+=(shellcheck)
if [[ ${#need[@]} -gt 0 ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: need Debian packages ${need[*]}; run as root or install them" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
		# A Debian point release may have replaced the pinned build; any 3.21.12 build generates
		# the same code (hack/proto.sh checks the version protoc reports).
		echo "deps: pinned packages unavailable; trying the distribution's 3.21.12 build" >&2
		apt-get install -y -qq --no-install-recommends "${need[@]%%=*}" >/dev/null
	fi
fi

bash "${ROOT}/hack/tools.sh" all
