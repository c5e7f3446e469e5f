//go:build linux

// Command cluster runs a Kubernetes cluster on one Linux machine whose Windows worker is the
// emulated Windows node (issue 22; docs/cluster.md): etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler of one pinned release (tools/kubernetes,
// tools/etcd) as Linux processes with TLS between them, and kubelet.exe and kube-proxy.exe (the
// Windows builds of the same release) on each emulated node (test/winnode), joined to it.
//
//	cluster up   --root DIR --bin BINDIR          start the control plane, write DIR/kubeconfig
//	cluster join --root DIR --node NAME --node-root NODEROOT --kubelet KUBELET.EXE [--kube-proxy KUBE-PROXY.EXE]
//	                                              link a running node to the cluster, start its kubelet
//	                                              and kube-proxy
//	cluster down --root DIR                       stop everything, nodes included; leave nothing
//	cluster run  --root DIR -- PROGRAM ARGS…      run a program with KUBECONFIG, on the cluster's network
//
// hack/cluster.sh builds what is needed and calls these; see docs/cluster.md.
//
// Where things run. The control plane has a network namespace of its own (DIR/netns/cluster,
// made with hcsemu's namespace helpers), not the machine's and not a node's: it plays the
// machines of a real control plane. In it a Linux bridge, phys0 (10.251.0.1/24), is the
// "physical" network the nodes share; kube-apiserver listens on 10.251.0.1:6443 and etcd,
// the controller manager and the scheduler on its loopback. Each Windows node's host namespace
// (hcsemu's <root>/netns/host, where its containerd.exe, shims and kubelet.exe run) gets one end
// of a veth pair as its NIC, 10.251.0.(10+N)/24, the other end a port of phys0. So kubelet
// reaches the API server at 10.251.0.1, and the API server reaches kubelet's port 10250 (logs,
// exec, attach, port-forward: API server → kubelet → containerd's streaming server) at the
// node's InternalIP, which kubelet is told (--node-ip). Node N's pod subnet is its HNS network's
// (winnode --pod-subnet, 10.250.(N-1).0/24 from hack/cluster.sh), and join routes it as static
// routes (or flannel host-gw) do on win-bridge clusters: the control plane and every node joined
// before get a route to it through the node's address, the node a route to each of theirs
// (podroutes_linux.go; joined nodes are recorded in DIR/joined), and the Node's podCIDR is set to
// it. CoreDNS (a process on phys0 or a pod) and kube-proxy (a process in a node's host namespace)
// plug into this without changing it. Nothing is added to the machine's own network namespace:
// the links join namespaces of the cluster's own.
//
// Process model (as test/winnode's): `up` starts `cluster serve` detached (its own session),
// which starts the control plane's processes in the namespace, each step timed in DIR/steps,
// writes DIR/cluster.env when the API server is ready, and stops them in reverse order on
// SIGTERM. `down` stops each node (its own `winnode down`), then serve, then sweeps every
// process left that belongs to DIR (never itself or its ancestors), the namespace and the
// folder, so it also cleans up after a crash of any part.
package main
