#!/usr/bin/env bash
# hack/cluster.sh runs a Kubernetes cluster on this Linux machine whose Windows worker is the
# emulated Windows node (test/cluster, docs/cluster.md): etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler of the pinned release (tools/kubernetes,
# tools/etcd) as Linux processes with TLS between them, in a network namespace of their own,
# and the emulated Windows node (hack/winnode.sh) with kubelet.exe (the Windows build of the same
# release) joined to it. As root.
#
#   hack/cluster.sh up [--root DIR] [--containerd 2|1.7] [--windows-nodes N] [--kube-proxy daemonset|process]
#   hack/cluster.sh down [--root DIR]
#   hack/cluster.sh run [--root DIR] PROGRAM ARGS…      e.g. run kubectl get nodes -o wide
#   hack/cluster.sh test [--root DIR] [--containerd 2|1.7] [--windows-nodes N] [--kube-proxy daemonset|process] [go test flags…]
#   hack/cluster.sh bench [--root DIR] [-test.bench RE]  pod start-up and Service figures on a running cluster
#
# up builds what is missing (cached in $RUNHCS_CACHE), prints the time of each step, writes
# DIR/kubeconfig and DIR/cluster.env. DIR defaults to /tmp/runhcs-cluster. --windows-nodes N
# (default 1) emulated Windows nodes, each a host of its own: node K lives in
# DIR/nodes/winnode-K, has the address 10.251.0.(10+K) and the pod subnet 10.250.(K-1).0/24,
# and each node's host routes the others' pod subnets (docs/cluster.md, "Two nodes").
# --kube-proxy daemonset (the default) runs each node's kube-proxy.exe as the HostProcess pod of
# the DaemonSet kube-system/kube-proxy-windows, as kubeadm clusters with Windows nodes do;
# process runs it as a service of the node beside kubelet.exe (docs/cluster.md). run runs a program with KUBECONFIG set, on the cluster's network, with
# the pinned kubectl first on PATH. down leaves nothing, also after a crash of any part. test
# brings a cluster up, runs test/k8s against it, checks that down cleans up after a crash
# (test/cluster TestDownAfterCrash), takes it down after a crash of its nodes' parts (test/cluster
# TestDownAfterNodeCrash) (make test-cluster); test/k8s learns how
# many Windows nodes to expect from RUNHCS_CLUSTER_WINDOWS_NODES. bench prints the pod
# start-up figures (p50, p90, p99 over 30 pods: process-isolated, Hyper-V, a Deployment scaled
# from 0 to 30; test/k8s BenchmarkPodStartup) and the Service figures (kube-proxy's sync of 100
# Services of 3 backends, connect latency through a ClusterIP against the pod address; test/k8s
# BenchmarkServices) of the cluster that is up, with the load average.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
cmd="${1:-}"
[[ $# -gt 0 ]] && shift
dir=/tmp/runhcs-cluster
containerd=2
nodes=1
kube_proxy=daemonset
while [[ $# -gt 0 ]]; do
	case "$1" in
	--root) dir="$2"; shift 2 ;;
	--containerd) containerd="$2"; shift 2 ;;
	--windows-nodes) nodes="$2"; shift 2 ;;
	--kube-proxy) kube_proxy="$2"; shift 2 ;;
	*) break ;;
	esac
done
# The cluster's pod CIDR (test/cluster podCIDR): node K's pod subnet is 10.250.(K-1).0/24.
pod_cidr=10.250.0.0/16
elapsed() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }'; }
# node_up K brings up the emulated Windows node K (hack/winnode.sh) with its own pod subnet.
node_up() {
	bash hack/winnode.sh up --root "${dir}/nodes/winnode-$1" --containerd "${containerd}" \
		--pod-subnet "10.250.$(($1 - 1)).0/24" --cluster-cidr "${pod_cidr}" >/dev/null
}
# node_join K links node K to the cluster, routes its pod subnet and starts its kubelet.exe.
node_join() {
	"${dir}/bin/cluster" join --root "${dir}" --node "winnode-$1" --index "$1" --node-root "${dir}/nodes/winnode-$1" \
		--kubelet "$(bash hack/tools.sh path kubelet.exe)" --kube-proxy "$(bash hack/tools.sh path kube-proxy.exe)"
}
case "${cmd}" in
up)
	case "${containerd}" in
	2 | 1.7) ;;
	*) echo "cluster: --containerd ${containerd}: want 2 or 1.7" >&2; exit 2 ;;
	esac
	if ! [[ "${nodes}" =~ ^[1-9][0-9]*$ ]] || ((nodes > 200)); then
		echo "cluster: --windows-nodes ${nodes}: want a number from 1 to 200" >&2
		exit 2
	fi
	t0=$(date +%s.%N)
	echo "cluster: building (cached after the first run)" >&2
	bash hack/tools.sh kubernetes
	mkdir -p "${dir}/bin"
	CGO_ENABLED=0 go build -o "${dir}/bin/" ./test/cluster
	for t in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl coredns; do
		ln -f "$(bash hack/tools.sh path "${t}")" "${dir}/bin/${t}" 2>/dev/null || cp "$(bash hack/tools.sh path "${t}")" "${dir}/bin/${t}"
	done
	printf 'cluster: %-34s %7.2fs\n' "build" "$(elapsed "${t0}")" >&2
	"${dir}/bin/cluster" up --root "${dir}" --bin "${dir}/bin" --kube-proxy "${kube_proxy}" >/dev/null
	# Node 1 first: its up builds and caches what every node needs. The other nodes come up
	# meanwhile node 1 joins (each its own hcsemu, Wine prefix and wineserver, containerd.exe),
	# then join one by one, each join routing its pod subnet to and from the nodes before it.
	node_up 1
	declare -A upping=()
	for ((k = 2; k <= nodes; k++)); do
		node_up "${k}" 2>"${dir}/logs/winnode-${k}-up.log" &
		upping[${k}]=$!
	done
	node_join 1
	for ((k = 2; k <= nodes; k++)); do
		rc=0
		wait "${upping[${k}]}" || rc=$?
		sed 's/^/  /' "${dir}/logs/winnode-${k}-up.log" >&2
		if ((rc != 0)); then
			echo "cluster: node winnode-${k} failed to come up (exit ${rc}); hack/cluster.sh down --root ${dir} removes what is left" >&2
			exit 1
		fi
		node_join "${k}"
	done
	printf 'cluster: %-34s %7.2fs (Windows nodes: %d)\n' "cluster up" "$(elapsed "${t0}")" "${nodes}" >&2
	cat "${dir}/cluster.env"
	echo "cluster: up; kubeconfig ${dir}/kubeconfig; try: hack/cluster.sh run --root ${dir} kubectl get nodes -o wide; stop with: hack/cluster.sh down --root ${dir}" >&2
	;;
down)
	[[ -e "${dir}" ]] || exit 0
	[[ -x "${dir}/bin/cluster" ]] || { mkdir -p "${dir}/bin"; go build -o "${dir}/bin/" ./test/cluster; }
	# down removes the folder, its own binary included: run a copy.
	tmp="$(mktemp /tmp/cluster-down.XXXXXX)"
	cp "${dir}/bin/cluster" "${tmp}"
	chmod +x "${tmp}"
	rc=0
	"${tmp}" down --root "${dir}" || rc=$?
	rm -f "${tmp}"
	exit "${rc}"
	;;
run)
	PATH="${dir}/bin:${PATH}" exec "${dir}/bin/cluster" run --root "${dir}" -- "$@"
	;;
test)
	t_test=$(date +%s.%N)
	bash "$0" down --root "${dir}"
	trap 'bash "$0" down --root "${dir}"' EXIT
	bash "$0" up --root "${dir}" --containerd "${containerd}" --windows-nodes "${nodes}" --kube-proxy "${kube_proxy}" >/dev/null
	CGO_ENABLED=0 go test -c -o "${dir}/bin/k8s.test" ./test/k8s
	t0=$(date +%s.%N)
	rc=0
	RUNHCS_CLUSTER_CONTAINERD="${containerd}" RUNHCS_CLUSTER_WINDOWS_NODES="${nodes}" PATH="${dir}/bin:${PATH}" \
		"${dir}/bin/cluster" run --root "${dir}" -- "${dir}/bin/k8s.test" -test.v -test.count=1 -test.timeout 20m "$@" || rc=$?
	printf 'cluster: %-34s %7.2fs\n' "test/k8s" "$(elapsed "${t0}")" >&2
	# down after a crash of the control plane leaves nothing and spares its caller (a control
	# plane of its own, beside this one); then this cluster is taken down after a crash of its
	# nodes' parts (the last node's serve, hcsemu and containerd.exe, the first's kubelet.exe),
	# and nothing of any node may be left.
	RUNHCS_CLUSTER_BIN="${dir}/bin" RUNHCS_CLUSTER_CRASH_ROOT="${dir}" \
		go test -count=1 -v -timeout 10m -run 'TestDownAfterCrash|TestDownAfterNodeCrash' ./test/cluster || rc=$?
	printf 'cluster: %-34s %7.2fs (exit %d)\n' "test, containerd ${containerd}" "$(elapsed "${t_test}")" "${rc}" >&2
	exit "${rc}"
	;;
bench)
	CGO_ENABLED=0 go test -c -o "${dir}/bin/k8s.test" ./test/k8s
	echo "cluster: load average before: $(cat /proc/loadavg)" >&2
	PATH="${dir}/bin:${PATH}" "${dir}/bin/cluster" run --root "${dir}" -- "${dir}/bin/k8s.test" \
		-test.run '^$' -test.bench 'PodStartup|Services' -test.benchtime 1x -test.timeout 60m "$@"
	echo "cluster: load average after: $(cat /proc/loadavg)" >&2
	;;
*)
	echo "usage: $0 up|down|run|test|bench [--root DIR] [--containerd 2|1.7] [--windows-nodes N] …" >&2
	exit 2
	;;
esac
