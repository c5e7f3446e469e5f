// Package hcsemu is an emulator of a Windows host's container services for Linux. This package
// is the Host Compute Service (compute systems, processes, silos, cgroups, utility VMs and the
// containers hosted in them, users, gMSA), the server that serves every service on a unix
// socket and on loopback TCP for the stand-in DLLs under Wine, and the wiring of both; the other
// services are packages of their own, which import neither this package nor each other:
//
//   - internal/hcsemu/hns: the Host Network Service and its Linux dataplane;
//   - internal/hcsemu/storage: the storage filter (layers, volumes, import and export);
//   - internal/hcsemu/dispatch: what a service's wire methods are; Engine.methods
//     (dispatch_linux.go) composes the server's table from each service's group;
//   - internal/hcsemu/hresult: the HRESULT errors, strict decoding and GUIDs all of them use.
//
// The protocol is the leaf internal/hcsemu/wire, which the client (internal/hcsemu/client, the
// computecore.API and computenetwork.API of Linux builds) imports too; internal/hcsemu/layout
// says where the emulator keeps its cgroups, network namespaces and VM inits. cmd/hcsemu is the
// daemon. Compute systems reach HNS and the storage filter through the narrow interfaces
// networks and volumes (engine_linux.go). Importing the package has no side effect: a program
// that runs an Engine calls Reexec first (reexec_linux.go), which runs the silo and VM inits
// the engine re-executes it as.
//
// Files: validate.go, vm_validate.go (documents checked before anything is made); state.go (the
// state table); engine_linux.go, process_linux.go, mounts*_linux.go, pipes_linux.go,
// hcsv1_linux.go, dns_linux.go (systems and processes); cgroups*_linux.go, spawn*_linux.go,
// silo_linux.go, vminit_linux.go, sweep_linux.go (what Linux gives them); vm*_linux.go,
// hosted_linux.go, osbuild.go (utility VMs, hosted containers, OS builds); users*.go, ccg.go
// (accounts, gMSA); cmdline.go, resolve.go, hostpaths.go (Windows command lines and paths);
// server_linux.go, unix_linux.go, tcp_linux.go, listen.go, gate_linux.go, daemon_linux.go (the
// server and its transports); methods_*_linux.go, fault*_linux.go, hostperf_linux.go (wire
// methods, fault injection, the host's figures).
//
// The contract (documents, states, HRESULTs, every assumption with its source) is
// docs/emulator.md. internal/layering's TestImportRules checks what each package imports.
package hcsemu
