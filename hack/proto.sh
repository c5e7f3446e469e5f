#!/usr/bin/env bash
# hack/proto.sh regenerates the Go code of protocols/**/*.proto next to each .proto, with Debian's
# protoc (package protobuf-compiler, version pinned below) and the protoc-gen-go and
# protoc-gen-go-ttrpc pinned in tools/go.mod.
#
#   hack/proto.sh           regenerate in place
#   hack/proto.sh --check   regenerate into a temporary folder and fail if it differs from the tree
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE=github.com/openhcs/runhcs
# The protoc version is written into every generated file's header, so a different protoc makes
# the check fail; hack/deps.sh installs this one.
PROTOC_VERSION="3.21.12"

if ! command -v protoc >/dev/null; then
	echo "proto: protoc not found; run hack/deps.sh (apt package protobuf-compiler ${PROTOC_VERSION})" >&2
	exit 1
fi
have="$(protoc --version | awk '{print $2}')"
if [[ "${have}" != "${PROTOC_VERSION}" ]]; then
	echo "proto: protoc ${have} found, ${PROTOC_VERSION} required (hack/deps.sh installs it)" >&2
	exit 1
fi

bash "${ROOT}/hack/tools.sh" proto
GEN_GO="$(bash "${ROOT}/hack/tools.sh" path protoc-gen-go)"
GEN_TTRPC="$(bash "${ROOT}/hack/tools.sh" path protoc-gen-go-ttrpc)"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# The include tree: our protos under their Go import path (so the registered file names are
# unique, e.g. github.com/openhcs/runhcs/protocols/stats/stats.proto), and cgroups' metrics.proto
# under the path the cgroups module registers it with.
inc="${work}/include"
mkdir -p "${inc}/${MODULE}" "${inc}/github.com/containerd/cgroups/cgroup1/stats"
cp -r "${ROOT}/protocols" "${inc}/${MODULE}/protocols"
cgroups="$(cd "${ROOT}" && go mod download github.com/containerd/cgroups/v3 && go list -m -f '{{.Dir}}' github.com/containerd/cgroups/v3)"
cp "${cgroups}/cgroup1/stats/metrics.proto" "${inc}/github.com/containerd/cgroups/cgroup1/stats/"

out="${work}/out"
mkdir -p "${out}"
protos=()
while IFS= read -r f; do
	protos+=("${MODULE}/${f}")
done < <(cd "${ROOT}" && find protocols -name '*.proto' | sort)

protoc -I "${inc}" -I /usr/include \
	--plugin=protoc-gen-go="${GEN_GO}" --plugin=protoc-gen-go-ttrpc="${GEN_TTRPC}" \
	--go_out="${out}" --go_opt=module="${MODULE}" \
	--go_opt=Mgithub.com/containerd/cgroups/cgroup1/stats/metrics.proto=github.com/containerd/cgroups/v3/cgroup1/stats \
	--go-ttrpc_out="${out}" --go-ttrpc_opt=module="${MODULE}" \
	"${protos[@]}"

if [[ "${1:-}" == "--check" ]]; then
	status=0
	while IFS= read -r f; do
		if ! diff -u "${ROOT}/${f}" "${out}/${f}"; then
			status=1
		fi
	done < <(cd "${out}" && find . -name '*.go' | sed 's|^\./||' | sort)
	# A committed generated file whose .proto is gone is stale too.
	while IFS= read -r f; do
		if [[ ! -e "${out}/${f}" ]]; then
			echo "proto: ${f} is not generated from any .proto" >&2
			status=1
		fi
	done < <(cd "${ROOT}" && find protocols -name '*.pb.go' | sort)
	if [[ ${status} -ne 0 ]]; then
		echo "proto: generated code differs from the committed code; run make proto" >&2
	fi
	exit ${status}
fi
(cd "${out}" && find . -name '*.go' -print0 | xargs -0 -I{} cp {} "${ROOT}/{}")
