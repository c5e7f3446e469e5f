// Package k8s is the Kubernetes suite of the cluster with an emulated Windows node (issue 22;
// hack/cluster.sh, docs/cluster.md): client-go (v0.37.2, the cluster's release) and the pinned
// kubectl drive the API server as users do, and the tests check what the Windows node does with
// it: the Node it registers, the documented RuntimeClasses (docs/install-windows.md) and their
// overhead and scheduling, pods of each isolation and their logs, the streams (logs -f, exec,
// attach, port-forward), the summary API, what users do with pods there (probes, volumes,
// termination, limits, identity: helpers in pods_linux_test.go), a Deployment's rollout and a
// drain that leaves nothing on the node, traffic between pods and to them, and kubelet.exe and
// containerd.exe restarted under running pods (the node's own state is asked of its hcsemu and
// /proc). BenchmarkPodStartup prints pod start-up figures (`hack/cluster.sh bench`).
// They are Linux tests run on the cluster's network with its KUBECONFIG
// (`hack/cluster.sh run k8s.test`); `make test-cluster` builds and runs them against a fresh
// cluster. Without a cluster they skip, except in CI.
package k8s
