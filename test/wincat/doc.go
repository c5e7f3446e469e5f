// Command wincat is the emulated Windows node's stand-in for wincat.exe, the program that
// Kubernetes' Windows pause image carries at C:\Windows\System32\wincat.exe
// (kubernetes/kubernetes build/pause/Dockerfile_windows) and that containerd 1.7's CRI runs in a
// pod's sandbox container for PortForward: `wincat.exe 127.0.0.1 PORT`, its stdin and stdout the
// forwarded stream (pkg/cri/server/sandbox_portforward_windows.go; containerd 2.x dials the pod's
// IP itself instead). In a Hyper-V pod that is the sandbox's container which the shim hosts in the
// pod's utility VM for execs (internal/shim/task/sandboxexec.go), so 127.0.0.1 is the pod's.
//
// It is a Linux program (hcsemu runs it in the pause container), not Windows: it connects to
// HOST:PORT over TCP, copies stdin to the connection (closing the connection's write side when
// stdin ends) and the connection to stdout, and exits when the connection's side ends. A usage
// error exits 2, a failed connection 1, each with a message on stderr.
package main
