// Package hcsemu is an emulator of the Host Compute Service (vmcompute) and of the Host Network
// Service for Linux: the engine that keeps compute systems and processes with HCS's documents,
// states, notifications and HRESULTs, and HNS networks, endpoints and namespaces with HCN's, and the server that serves it on a unix socket and, optionally, on loopback TCP for
// the stand-in computecore.dll under Wine (cmd/hcsemu is the daemon). Its client, the
// computecore.API of Linux builds, is internal/hcsemu/client; the protocol between them is the
// leaf package internal/hcsemu/wire, which both import. internal/hcs chooses the client.
//
// It imports computecore and computenetwork (HRESULTs, event types), internal/hcs/schema2 and
// internal/hns/hcn (the documents) and wire; nothing above those. Files:
//
//   - validate.go: documents decoded strictly against schema2 (unknown or mistyped fields are
//     HCS_E_INVALID_JSON naming the field's path; out-of-range numbers E_INVALIDARG), and the
//     checks HCS makes before creating anything.
//   - state.go: the state machine Created → Running ⇄ Paused → Stopped.
//   - cmdline.go, resolve.go: Windows command lines (CommandLineToArgvW) and executable lookup
//     (CreateProcess's search order, PATH, PATHEXT) in a container's volume, its C:\.
//   - engine_linux.go, process_linux.go, mounts_linux.go: systems (one lock each; the engine's
//     lock guards only the table), processes chrooted in Container.Storage.Path, mapped
//     directories as bind mounts.
//   - cgroups_linux.go, spawn_linux.go: cgroup v1 groups per system under
//     /sys/fs/cgroup/<controller>/hcsemu/<daemon instance>/<system> for limits, pause
//     (freezer), statistics and killing; processes are forked from one locked thread inside the
//     groups, with Pdeathsig, so they die with the daemon.
//   - storage.go, storage_linux.go, layerfiles_linux.go: the storage
//     filter (vmcompute.dll's layer functions): activated and prepared layers as overlayfs
//     volumes named \\?\Volume{GUID}\ under <root>/volumes, which Container.Storage.Path
//     resolves to; scratch disks as emulated VHDX files; recorded on disk so that a restarted
//     daemon detaches what a dead one left.
//   - layerimport_linux.go, backupstream.go: ImportLayer and ExportLayer for layers over
//     parents, on hcsshim's legacy import/export folders (Win32 backup streams), converted to
//     and from the layer tars internal/wclayer's folder importer and exporter read and write.
//   - server_linux.go: connections, concurrent requests, per-connection event queues, and
//     turning a method's answer into the response frame.
//   - dispatch_linux.go: the dispatch table from wire method name to the method serving it;
//     methods_compute_linux.go and methods_storage_linux.go: its entries for compute systems and
//     processes, and for the storage filter. A new group of
//     wire methods is a new methods_*_linux.go file adding its own entries.
//   - fault_linux.go, methods_fault_linux.go: fault injection (wire/fault.go, `hcsemu
//     fault`): stalls, failures and a delay applied in the dispatcher before any wire method
//     runs (never to the fault methods, which TCP refuses), crashing a system with
//     UnexpectedExit, and dropping every client connection.
//   - gate_linux.go: who may talk to the daemon, decided in one place for every transport
//     before a connection is served: on the unix socket (0600, in an owner-only folder when
//     the daemon makes it) the daemon's own uid only (SO_PEERCRED); on TCP, a first frame
//     with the daemon's key (--tcp-key-file, new at every start). Refusals are logged.
//   - unix_linux.go: the unix socket transport, stdio sent as descriptors.
//   - tcp_linux.go, listen.go: the loopback TCP transport (--tcp-address): the same handler,
//     with a process's stdio kept under a token for the client's AttachStdio connections
//     instead of sent as descriptors; only loopback addresses are served.
//   - daemon_linux.go: Run, the daemon's wiring of listeners, engine and server.
//   - hns.go, hns_v1.go: HNS objects, their validation and queries (v2), and the v1 HNSCall
//     surface translated onto them; methods_hns_linux.go: their wire methods.
//   - hnsnet_linux.go: the HNS dataplane: the emulated host's network namespace
//     (<root>/netns/host), a bridge per network, a netns per HNS namespace, a veth pair per
//     attached endpoint, nftables rules for port mappings and NAT; `hcsemu hostns`. A system
//     naming Container.Networking.Namespace has its processes forked in that namespace
//     (spawn_linux.go); one listing Container.Networking.NetworkAdapters gets a namespace of
//     the emulator's holding them, removed with it. HNS state is cleaned, not persisted, with
//     the daemon (hns.go says why).
//   - hcsv1_linux.go: HCS schema 1 modify requests (ResourceType, not ResourcePath), as
//     hcsshim's HotAttachEndpoint sends them: an HNS endpoint added to or removed from the
//     namespace a container runs in (made for it, if it has none and no process yet).
//
// Like vmcompute, the daemon keeps systems alive across the death of the client that made them:
// any client can open one by id. A stopped system is forgotten when its last handle closes. If
// the daemon dies, its processes die with it and every client sees its systems exit.
package hcsemu
