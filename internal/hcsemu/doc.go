// Package hcsemu is an emulator of a Windows host's container services for Linux, and this
// package only wires it: Run (daemon_linux.go) opens the listeners, makes the compute engine and
// serves it, and tears both down in reverse order; api_linux.go and netnsfile_linux.go name the
// surface the programs beside the daemon use (cmd/hcsemu, test/winnode, test/cluster, the
// suites), so that they import one package. Each service is a package of its own:
//
//   - internal/hcsemu/compute: the Host Compute Service (compute systems, processes, silos,
//     cgroups, utility VMs and the containers hosted in them, users, gMSA), the dispatch table
//     of every service's wire methods, and fault injection;
//   - internal/hcsemu/server: the transports (a unix socket; loopback TCP for the stand-in DLLs
//     under Wine), the gate and the connections, serving any engine through its interface;
//   - internal/hcsemu/hns: the Host Network Service and its Linux dataplane;
//   - internal/hcsemu/storage: the storage filter (layers, volumes, import and export);
//   - internal/hcsemu/dispatch: what a service's wire methods are, and their composition;
//   - internal/hcsemu/hresult: the HRESULT errors, strict decoding and GUIDs all of them use.
//
// The protocol is the leaf internal/hcsemu/wire, which the client (internal/hcsemu/client, the
// computecore.API and computenetwork.API of Linux builds) imports too; internal/hcsemu/layout
// says where the emulator keeps its cgroups, network namespaces and VM inits. Importing the
// package has no side effect: a program that runs the daemon calls Reexec first.
//
// The contract (documents, states, HRESULTs, every assumption with its source) is
// docs/emulator.md. internal/layering's TestImportRules checks what each package imports.
package hcsemu
