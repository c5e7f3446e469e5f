//go:build linux

// Command winnode runs an emulated Windows Kubernetes node on Linux (issue 13): the Windows build
// of containerd (containerd.exe, pinned 2.4.2) with its CRI plugin, the Windows builds of this
// project's shim and snapshotter and of the CNI plugin win-bridge, all under Wine with a private
// prefix whose stand-in DLLs (hack/wine) forward HCS, HNS and storage calls to hcsemu, which runs
// underneath as the Windows host's services. A loopback-only OCI registry (go-containerregistry's
// registry package) holds the Windows-format test images and is every registry's mirror.
//
//	winnode up   --root DIR --bin BINDIR [--snapshotter wcow|windows] [--pod-subnet CIDR]
//	                                                                   start the node, print node.env
//	winnode down --root DIR                                            stop it, leave nothing
//	winnode run  --root DIR -- PROGRAM ARGS…                           run a program inside the node
//	winnode kubelet --root DIR --exe KUBELET.EXE [--kubeconfig FILE] [-- FLAGS…]
//	                                                                   start kubelet.exe in the node
//	winnode restart --root DIR kubelet|containerd                      kill one and start it as it was
//
// hack/winnode.sh builds what the node needs and calls this command; see docs/winnode.md.
//
// Process model: `up` starts `winnode serve` detached (its own session) and waits until it
// reports ready in DIR/node.env, or fails. serve owns every part: hcsemu (a child, in the
// machine's network namespace, serving its unix socket and loopback TCP for the stand-in DLLs),
// then, in the emulated host's network namespace (hcsemu's <root>/netns/host, where a Windows
// host's processes see its vSwitch), a relay of hcsemu's TCP port (so the DLLs of processes there
// reach hcsemu at the same address), the registry and containerd.exe with its wineserver. On
// SIGTERM it stops them in reverse order. `down` signals serve and then sweeps whatever a crashed
// part left (processes, the wineserver, hcsemu's mounts and namespaces through a hcsemu restarted
// on the same root, the folder).
//
// The node's pod subnet (--pod-subnet, default 10.250.0.0/24; podnet_linux.go) is its HNS
// L2Bridge network's, with the gateway win-bridge expects (.2) and host-local's range; the CNI
// configuration exempts --cluster-cidr (every node's subnets) from outbound NAT. Each node is a
// host of its own: its hcsemu (socket, loopback TCP port and key in DIR, found by the stand-in
// DLLs through HCSEMU_TCP_ADDRESS and HCSEMU_TCP_KEY_FILE in the node's environment), host
// network namespace (its bridges, veths and nftables table live there), cgroup folders (named
// by the emulator root), Wine prefix and wineserver (so containerd's pipe names are the node's
// own), registry and kubelet ports in its own namespace: two nodes share nothing but the binaries.
//
// `kubelet` (kubelet_linux.go) starts kubelet.exe detached in the node's prefix and the host's
// network namespace, with a Windows node's flags, and returns when its healthz answers; it is
// a process of the prefix, so serve's stop (wineserver -k) and down end it like containerd.exe.
// Without --kubeconfig it runs standalone, static pods from DIR/kubelet/manifests, its
// read-only port (10255, host namespace) serving /stats/summary. The prefix's registry is a
// Windows Server 2022 node's (nodeRegistry) and its pdh.dll the stand-in (hack/wine/pdh), which
// kubelet's node figures need.
//
// `restart` (restart_linux.go) kills kubelet.exe or containerd.exe and starts it again as it
// was started (kubelet with the flags `kubelet` recorded in DIR/kubelet/kubelet.args.json),
// while the pods keep running: what Restart-Service, or a crash and the service manager, do.
package main
