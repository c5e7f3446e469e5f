// Package compute emulates the Host Compute Service: compute systems (process-isolated
// containers, utility VMs and the containers hosted in them), their processes, silos, cgroups,
// mounts, mapped pipes, users and gMSA, and the HCS v1 surface. Its Engine also composes the
// dispatch table of every emulated service's wire methods (dispatch_linux.go) and holds the
// fault injector, and so it is what internal/hcsemu/server serves, through the server's Engine
// interface, which the Engine meets without importing the server.
//
// It imports the services it uses, internal/hcsemu/hns and internal/hcsemu/storage, and asks
// of them only what the narrow interfaces networks and volumes say (engine_linux.go); the
// documents (internal/hcs/schema2, internal/hns/hcn), the protocol (internal/hcsemu/wire), the
// leaves internal/hcsemu/dispatch, internal/hcsemu/hresult and internal/hcsemu/layout,
// internal/winargs for Windows command lines, and the leaves it shares with the Linux
// HostProcess host (internal/hostprocess): internal/cgroup1 (a group's limits, freezer, kill
// and accounting) and internal/winlinux (the accounts' Linux identities, console events as
// signals, exit codes). It never imports the server or the wiring above
// it (internal/layering).
//
// Files: validate.go, vm_validate.go (documents checked before anything is made); state.go (the
// state table, through which every state change goes); engine_linux.go, process_linux.go,
// mounts*_linux.go, pipes_linux.go, hcsv1_linux.go, dns_linux.go (systems and processes);
// cgroups_linux.go (this daemon's groups, over internal/cgroup1), spawn_linux.go, silo_linux.go, sweep_linux.go, reexec_linux.go (what
// Linux gives them); users*.go, ccg.go (accounts, gMSA); cmdline.go, resolve.go, hostpaths.go
// (Windows command lines and paths); dispatch_linux.go, methods_*_linux.go, fault_linux.go,
// hostperf_linux.go (the wire methods, fault injection, the host's figures).
//
// Utility VMs and hosted containers are the files vm*_linux.go, hosted_linux.go,
// vminit_linux.go, cgroups_vm_linux.go, spawn_vm_linux.go, fault_vm_linux.go,
// methods_fault_vm_linux.go and osbuild.go. They stay in this package: a VM is a system of the
// engine's table, under its locks and state table, and a hosted container and its VM reach
// into each other (shares and disks it borrows, everything in it ending when it crashes), so a
// package of their own would import compute and be imported by it.
//
// The tests run the engine behind the real server and client (daemon_linux_test.go), which
// they may import because the server imports no service.
package compute
