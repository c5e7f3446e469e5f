#!/usr/bin/env bash
# hack/tools.sh builds the pinned tools the build and the tests use, from the Go module proxy,
# into a cache keyed by tool version and Go version, and prints nothing but errors.
#
#   hack/tools.sh [all|proto|lint|containerd|containerd1.7|cni|containerd-windows|containerd1.7-windows|kubernetes|kubelet|kube-proxy]
#   (default: all)
#
# The pins live in tools/go.mod (protoc-gen-go, protoc-gen-go-ttrpc, containerd 2.x and ctr),
# tools/containerd1.7/go.mod, tools/lint/go.mod (staticcheck) and tools/cni/go.mod (the CNI
# plugins win-bridge and its IPAM, host-local, built for windows/amd64: the Windows tests run
# them under Wine). containerd-windows builds the same containerd 2.x and ctr pins for
# windows/amd64 (containerd.exe, ctr.exe), and containerd1.7-windows the containerd 1.7 pins
# (paths containerd1.7.exe, ctr1.7.exe), for running them under Wine (hack/wine/containerd.sh,
# make test-wine-containerd); not part of `all`. kubernetes builds the cluster's pins
# (hack/cluster.sh): kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (Linux) and
# kubelet.exe and kube-proxy.exe (windows/amd64) from tools/kubernetes/go.mod, etcd from
# tools/etcd/go.mod and CoreDNS from tools/coredns; not part of `all` either (kubelet.exe alone
# takes about 12 minutes on one busy core); kubelet builds kubelet.exe alone, kube-proxy
# kube-proxy.exe alone. Cache: $RUNHCS_CACHE, default
# ~/.cache/runhcs. `hack/tools.sh path NAME` prints where a tool lives (built or not).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${RUNHCS_CACHE:-${HOME}/.cache/runhcs}"
GOVER="$(go env GOVERSION)"

# Versions read from the pins so there is one place to change them.
modver() { # modver DIR MODULE
	(cd "${ROOT}/$1" && go list -m -f '{{.Version}}' "$2")
}

# containerd is built without cgo: the btrfs snapshotter needs cgo and headers; devmapper and zfs
# are not used. CRI stays in: the CRI suites drive it.
CONTAINERD_TAGS="no_btrfs no_devmapper no_zfs no_aufs"

# RECIPE names how tools are built; bump it when build flags change so cached builds are redone.
RECIPE=r1

tooldir() { # tooldir NAME VERSION
	echo "${CACHE}/tools/$1-$2-${GOVER}-${RECIPE}"
}

build() { # build MODDIR NAME VERSION PKG [TAGS [LDFLAGS]]; GOOS and GOARCH from the environment
	local moddir="$1" name="$2" version="$3" pkg="$4" tags="${5:-}" ldflags="${6:-}"
	local dir
	dir="$(tooldir "${name}" "${version}")"
	if [[ -x "${dir}/${name}" ]]; then
		return 0
	fi
	mkdir -p "${dir}"
	echo "tools: building ${name} ${version} (${pkg})" >&2
	(cd "${ROOT}/${moddir}" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -tags "${tags}" -ldflags "${ldflags}" \
		-o "${dir}/${name}.tmp" "${pkg}")
	chmod +x "${dir}/${name}.tmp"
	mv "${dir}/${name}.tmp" "${dir}/${name}"
}

path_of() {
	case "$1" in
	protoc-gen-go) echo "$(tooldir protoc-gen-go "$(modver tools google.golang.org/protobuf)")/protoc-gen-go" ;;
	protoc-gen-go-ttrpc) echo "$(tooldir protoc-gen-go-ttrpc "$(modver tools github.com/containerd/ttrpc)")/protoc-gen-go-ttrpc" ;;
	containerd) echo "$(tooldir containerd "$(modver tools github.com/containerd/containerd/v2)")/containerd" ;;
	ctr) echo "$(tooldir ctr "$(modver tools github.com/containerd/containerd/v2)")/ctr" ;;
	containerd1.7) echo "$(tooldir containerd "$(modver tools/containerd1.7 github.com/containerd/containerd)")/containerd" ;;
	ctr1.7) echo "$(tooldir ctr "$(modver tools/containerd1.7 github.com/containerd/containerd)")/ctr" ;;
	staticcheck) echo "$(tooldir staticcheck "$(modver tools/lint honnef.co/go/tools)")/staticcheck" ;;
	containerd.exe | ctr.exe) echo "$(tooldir "$1" "$(modver tools github.com/containerd/containerd/v2)")/$1" ;;
	containerd1.7.exe) echo "$(tooldir containerd.exe "$(modver tools/containerd1.7 github.com/containerd/containerd)")/containerd.exe" ;;
	ctr1.7.exe) echo "$(tooldir ctr.exe "$(modver tools/containerd1.7 github.com/containerd/containerd)")/ctr.exe" ;;
	win-bridge.exe | host-local.exe) echo "$(tooldir "$1" "$(modver tools/cni github.com/containernetworking/plugins)")/$1" ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet.exe | kube-proxy.exe) echo "$(tooldir "$1" "$(modver tools/kubernetes k8s.io/kubernetes)")/$1" ;;
	etcd) echo "$(tooldir etcd "$(modver tools/etcd go.etcd.io/etcd/server/v3)")/etcd" ;;
	coredns) echo "$(tooldir coredns "$(corednsver)")/coredns" ;;
	*) echo "tools: unknown tool $1" >&2; return 1 ;;
	esac
}

proto() {
	build tools protoc-gen-go "$(modver tools google.golang.org/protobuf)" google.golang.org/protobuf/cmd/protoc-gen-go
	build tools protoc-gen-go-ttrpc "$(modver tools github.com/containerd/ttrpc)" github.com/containerd/ttrpc/cmd/protoc-gen-go-ttrpc
}
lint() {
	build tools/lint staticcheck "$(modver tools/lint honnef.co/go/tools)" honnef.co/go/tools/cmd/staticcheck
}
containerd2() {
	local v
	v="$(modver tools github.com/containerd/containerd/v2)"
	# The version variable containerd's Makefile sets, so `ctr version` says which release runs.
	local ld="-X github.com/containerd/containerd/v2/version.Version=${v}"
	build tools containerd "${v}" github.com/containerd/containerd/v2/cmd/containerd "${CONTAINERD_TAGS}" "${ld}"
	build tools ctr "${v}" github.com/containerd/containerd/v2/cmd/ctr "${CONTAINERD_TAGS}" "${ld}"
}
containerd2_windows() {
	local v
	v="$(modver tools github.com/containerd/containerd/v2)"
	local ld="-X github.com/containerd/containerd/v2/version.Version=${v}"
	GOOS=windows GOARCH=amd64 build tools containerd.exe "${v}" github.com/containerd/containerd/v2/cmd/containerd "${CONTAINERD_TAGS}" "${ld}"
	GOOS=windows GOARCH=amd64 build tools ctr.exe "${v}" github.com/containerd/containerd/v2/cmd/ctr "${CONTAINERD_TAGS}" "${ld}"
}
cni() {
	local v
	v="$(modver tools/cni github.com/containernetworking/plugins)"
	GOOS=windows GOARCH=amd64 build tools/cni win-bridge.exe "${v}" github.com/containernetworking/plugins/plugins/main/windows/win-bridge
	GOOS=windows GOARCH=amd64 build tools/cni host-local.exe "${v}" github.com/containernetworking/plugins/plugins/ipam/host-local
}
containerd17() {
	local v
	v="$(modver tools/containerd1.7 github.com/containerd/containerd)"
	local ld="-X github.com/containerd/containerd/version.Version=${v}"
	build tools/containerd1.7 containerd "${v}" github.com/containerd/containerd/cmd/containerd "${CONTAINERD_TAGS}" "${ld}"
	build tools/containerd1.7 ctr "${v}" github.com/containerd/containerd/cmd/ctr "${CONTAINERD_TAGS}" "${ld}"
}
containerd17_windows() {
	local v
	v="$(modver tools/containerd1.7 github.com/containerd/containerd)"
	local ld="-X github.com/containerd/containerd/version.Version=${v}"
	GOOS=windows GOARCH=amd64 build tools/containerd1.7 containerd.exe "${v}" github.com/containerd/containerd/cmd/containerd "${CONTAINERD_TAGS}" "${ld}"
	GOOS=windows GOARCH=amd64 build tools/containerd1.7 ctr.exe "${v}" github.com/containerd/containerd/cmd/ctr "${CONTAINERD_TAGS}" "${ld}"
}
# kubernetes builds the Kubernetes release and etcd the cluster runs. The version variables are the
# ones Kubernetes' hack/lib/version.sh sets (in k8s.io/client-go/pkg/version and
# k8s.io/component-base/version), so every binary reports the pinned release (kubelet reports it
# to the API server as the Node's kubeletVersion) instead of v0.0.0-master. The module proxy does
# not give the release's git commit, so gitCommit is left empty; buildDate is the release
# module's time, so builds are reproducible.
# kube_ldflags appends to the caller's ld the version variables of its release v.
kube_ldflags() {
	local key val major minor date
	major="${v#v}"
	major="${major%%.*}"
	minor="${v#v*.}"
	minor="${minor%%.*}"
	date="$(cd "${ROOT}/tools/kubernetes" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
	for kv in "gitVersion=${v}" "gitMajor=${major}" "gitMinor=${minor}" "gitCommit=" "gitTreeState=clean" "buildDate=${date}"; do
		key="${kv%%=*}"
		val="${kv#*=}"
		ld+=" -X k8s.io/client-go/pkg/version.${key}=${val} -X k8s.io/component-base/version.${key}=${val}"
	done
}
# kubelet builds kubelet.exe alone: what the emulated node's kubelet test needs (make
# test-winnode-kubelet), without the control plane.
kubelet() {
	local v ld=""
	v="$(modver tools/kubernetes k8s.io/kubernetes)"
	kube_ldflags
	GOOS=windows GOARCH=amd64 build tools/kubernetes kubelet.exe "${v}" k8s.io/kubernetes/cmd/kubelet "" "${ld}"
}
kubernetes() {
	local v ld=""
	v="$(modver tools/kubernetes k8s.io/kubernetes)"
	kube_ldflags
	build tools/etcd etcd "$(modver tools/etcd go.etcd.io/etcd/server/v3)" go.etcd.io/etcd/server/v3
	local cmd
	for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		build tools/kubernetes "${cmd}" "${v}" "k8s.io/kubernetes/cmd/${cmd}" "" "${ld}"
	done
	kubelet
	kube_proxy
	build tools/coredns coredns "$(corednsver)" .
}
# corednsver keys the CoreDNS build by its pin and by the plugin list tools/coredns/main.go
# compiles in, so a changed list builds again.
corednsver() {
	echo "$(modver tools/coredns github.com/coredns/coredns)-$(sha256sum "${ROOT}/tools/coredns/main.go" | cut -c1-8)"
}
# kube_proxy builds kube-proxy.exe: the Windows node's Service proxy (winkernel mode, on HNS
# load balancers), run beside kubelet.exe on each emulated node.
kube_proxy() {
	local v ld=""
	v="$(modver tools/kubernetes k8s.io/kubernetes)"
	kube_ldflags
	GOOS=windows GOARCH=amd64 build tools/kubernetes kube-proxy.exe "${v}" k8s.io/kubernetes/cmd/kube-proxy "" "${ld}"
}

case "${1:-all}" in
all) proto; lint; containerd2; containerd17; cni ;;
proto) proto ;;
lint) lint ;;
containerd) containerd2 ;;
containerd1.7) containerd17 ;;
cni) cni ;;
containerd-windows) containerd2_windows ;;
containerd1.7-windows) containerd17_windows ;;
kubernetes) kubernetes ;;
kubelet) kubelet ;;
kube-proxy) kube_proxy ;;
path) path_of "$2" ;;
*) echo "usage: $0 [all|proto|lint|containerd|containerd1.7|cni|containerd-windows|containerd1.7-windows|kubernetes|path NAME]" >&2; exit 2 ;;
esac
