// Package hcsemu is an emulator of the Host Compute Service (vmcompute) and of the Host Network
// Service for Linux: the engine that keeps compute systems and processes with HCS's documents,
// states, notifications and HRESULTs, and HNS networks, endpoints and namespaces with HCN's, and the server that serves it on a unix socket and, optionally, on loopback TCP for
// the stand-in computecore.dll under Wine (cmd/hcsemu is the daemon). Its client, the
// computecore.API of Linux builds, is internal/hcsemu/client; the protocol between them is the
// leaf package internal/hcsemu/wire, which both import. internal/hcs chooses the client.
//
// It imports computecore and computenetwork (HRESULTs, event types), internal/hcs/schema2 and
// internal/hns/hcn (the documents), wire, and the leaves internal/wclayer (the layer format of
// ImportLayer and ExportLayer), internal/winargs (Windows command lines), internal/atomicfile
// (its records), internal/emuvhdx (the emulated VHDX) and internal/hcsemu/layout (where its
// cgroups, network namespaces and VM inits live); nothing above those (internal/layering's
// TestImportRules checks it). Files:
//
//   - validate.go: documents decoded strictly against schema2 (unknown or mistyped fields are
//     HCS_E_INVALID_JSON naming the field's path; out-of-range numbers E_INVALIDARG), and the
//     checks HCS makes before creating anything.
//   - state.go: the state machine Created → Running ⇄ Paused → Stopped.
//   - cmdline.go, resolve.go: Windows command lines (CommandLineToArgvW) and executable lookup
//     (CreateProcess's search order and PATH; .exe appended) in a container's volume, its C:\.
//   - engine_linux.go, process_linux.go, mounts_linux.go: systems (one lock each; the engine's
//     lock guards only the table), processes chrooted in Container.Storage.Path, mapped
//     directories as bind mounts (mounts_file_linux.go: a single file too, as HCS maps one).
//   - pipes_linux.go: host named pipes mapped into a process-isolated container, as unix sockets
//     at C:\pipe\<name> that the TCP client (the stand-in computecore.dll, beside the host's
//     pipes under Wine) relays to the host pipe (tcp_linux.go attachPipe).
//   - cgroups_linux.go, spawn_linux.go: cgroup v1 groups per system under
//     /sys/fs/cgroup/<controller>/hcsemu/<daemon instance>/<system> for limits, pause
//     (freezer), statistics and killing; processes are forked from one locked thread inside the
//     groups, with Pdeathsig, so they die with the daemon; a container's (process-isolated, or
//     hosted in a VM, inside the VM's) in a UTS namespace named after its GuestOs.HostName, its
//     computer name.
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
//   - vm_validate.go, vm_linux.go, vm_modify_linux.go, hosted_linux.go, vminit_linux.go,
//     spawn_vm_linux.go, cgroups_vm_linux.go, fault_vm_linux.go, osbuild.go: utility VMs and
//     the containers hosted in them (see "Utility VMs" below); vm_network_linux.go and
//     hns_vm.go: a VM's network namespace and HNS endpoints as its NICs.
//   - gate_linux.go: who may talk to the daemon, decided in one place for every transport
//     before a connection is served: on the unix socket (0600, in an owner-only folder when
//     the daemon makes it) the daemon's own uid only (SO_PEERCRED); on TCP, a first frame
//     with the daemon's key (--tcp-key-file, new at every start). Refusals are logged.
//   - unix_linux.go: the unix socket transport, stdio sent as descriptors.
//   - tcp_linux.go, listen.go: the loopback TCP transport (--tcp-address): the same handler,
//     with a process's stdio kept under a token for the client's AttachStdio connections
//     instead of sent as descriptors; only loopback addresses are served.
//   - daemon_linux.go: Run, the daemon's wiring of listeners, engine and server.
//   - users.go, users_linux.go: the container's accounts ("Users" below); ccg.go: Container
//     Credential Guard instances ("gMSA" below).
//   - hns.go, hns_v1.go: HNS objects, their validation and queries (v2), and the v1 HNSCall
//     surface translated onto them; methods_hns_linux.go: their wire methods. dns.go,
//     dns_linux.go: endpoints' DNS settings and the container's resolver file ("DNS" below).
//   - hnsnet_linux.go: the HNS dataplane: the emulated host's network namespace
//     (<root>/netns/host), a bridge per network, a netns per HNS namespace, a veth pair per
//     attached endpoint, nftables rules for port mappings and NAT (what the host's own
//     programs reach of a mapping follows Windows per network type and build: hostReachOf);
//     `hcsemu hostns`. A system
//     naming Container.Networking.Namespace has its processes forked in that namespace
//     (spawn_linux.go); one listing Container.Networking.NetworkAdapters gets a namespace of
//     the emulator's holding them, removed with it. Every namespace the emulator makes lets all
//     groups ping (ping_group_range), as Windows lets every account. HNS state is cleaned, not
//     persisted, with the daemon (hns.go says why).
//   - silo_linux.go: a running process-isolated container's PID namespace (the server silo's
//     process view): a "silo init" (hcsemu re-executed, named smss) is its PID 1 until the
//     container stops, reaps orphans and mounts the namespace's procfs at the container's
//     C:\proc; the container's processes are forked into the namespace (spawn_linux.go), so they
//     see their own container's processes only, and one ending takes no other with it.
//   - hcsv1_linux.go: HCS schema 1 modify requests (ResourceType, not ResourcePath), as
//     hcsshim's HotAttachEndpoint sends them: an HNS endpoint added to or removed from the
//     namespace a container runs in (made for it, if it has none and no process yet).
//
// # Utility VMs (Hyper-V isolation)
//
// The emulator's VM contract, which internal/uvm relies on. Facts and sources:
// docs/notes/hyperv.md; the files are vm_*.go and hosted_linux.go.
//
// Create: HcsCreateComputeSystem(id, ComputeSystem{SchemaVersion ≥ 2.1, Owner,
// ShouldTerminateOnLastHandleClosed, VirtualMachine}). The VirtualMachine must have
// Chipset.Uefi.BootThis {DeviceType "VmbFs", DevicePath schema2.UVMBootDevicePath} and a VSMB
// share named "os" (schema2.UVMOSShareName) whose Path is a host folder (a base layer's
// UtilityVM\Files) holding EFI\Microsoft\Boot\bootmgfw.efi; ComputeTopology.Memory.SizeInMB > 0
// and ComputeTopology.Processor.Count ≥ 1 and at most the host's logical processors (hcsshim
// clamps it to service property ProcessorTopology.LogicalProcessorCount); SCSI controllers keyed
// by any name, LUN keys "0"–"63", attachments of existing emulated VHDX files (or files, for
// PassThru); unique share names; share paths that exist. Errors name the field: HCS_E_INVALID_JSON
// for a malformed or missing field, E_INVALIDARG for a value out of range, E_PATH_NOT_FOUND for a
// host path that does not exist. GuestConnection ({} is enough) is required for everything that
// goes through the guest: hosted containers, GuestRequests, HcsCreateProcess on the VM; without
// it they fail with E_NOT_SUPPORTED ("The request is not supported", microsoft/hcsshim#1327).
//
// Start: the VM's memory (SizeInMB) is charged against the host budget (--host-memory-mb);
// a VM that does not fit fails with E_OUTOFMEMORY (assumption: the HRESULT Hyper-V reports
// for "not enough memory in the system to start the virtual machine") and stays Created. The
// boot layer's build (OSBuildFile under the "os" share) must not be newer than the host's
// (--os-version), else HCS_E_IMAGE_MISMATCH. A VM is then a real boundary: a "VM init" process
// (hcsemu re-executed, vminit_linux.go) holds its own PID, mount, UTS and IPC namespaces, in a
// cgroup whose memory limit is SizeInMB and whose CPU quota is Count processors (reduced by
// Limit, each vCPU's share in 1–100000, hcsshim pkg/annotations) with Weight (0–10000) as
// cpu.shares; every process of the VM and of its hosted containers runs in those namespaces and below that
// cgroup. The guest's C:\ is the "os" share with a writable layer over it; the VM's procfs is
// at its C:\proc (the workload's ps reads it), a Linux artefact of the emulation. The VM's mount
// namespace is a slave of the daemon's VM folder: guest mounts the emulator makes (mapped disks,
// combined layers, mapped directories) appear in it; mounts made inside the VM never reach the
// host. Exit: SystemExited with GracefulExit (Shutdown),
// ForcedExit (Terminate, last handle closed with ShouldTerminateOnLastHandleClosed) or
// UnexpectedExit (crash fault; Status HCS_E_UNEXPECTED_EXIT); every hosted container then gets
// SystemExited with the same ExitType.
//
// Modify (HcsModifyComputeSystem on a Created or Running VM; Stopped: HCS_E_INVALID_STATE):
//
//	ResourcePath                                             RequestType      Settings
//	VirtualMachine/Devices/VirtualSmb/Shares                 Add              VirtualSmbShare
//	VirtualMachine/Devices/VirtualSmb/Shares                 Update           VirtualSmbShare (AllowedFiles only; RestrictFileAccess shares)
//	VirtualMachine/Devices/VirtualSmb/Shares                 Remove           {"Name": …}
//	VirtualMachine/Devices/Scsi/<controller>/Attachments/<lun> Add / Remove  Attachment / none
//	VirtualMachine/Devices/MappedPipes/<\\.\pipe\name>     Add / Remove     none
//	VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/<GUID>
//	                                                         Update / Remove  HvSocketServiceConfig / none
//	VirtualMachine/ComputeTopology/Memory/SizeInMB           (none) / Update  a bare number (MB)
//	VirtualMachine/ComputeTopology/Processor/Limits          (none) / Update  ProcessorLimits
//	VirtualMachine/Devices/NetworkAdapters/<nic id>          Add / Remove     NetworkAdapter {EndpointId, MacAddress}
//	                                                         Update           NetworkAdapter (the endpoint cannot change)
//
// with an optional GuestRequest (GuestModifySettingRequest), applied after the host part of an
// Add and before the host part of a Remove, the host part undone if the guest part fails:
//
//	MappedVirtualDisk Add/Remove {ContainerPath, Lun}: mounts the disk attached at controller 0
//	  (the only controller, or the one keyed "0" or hcsshim's first controller GUID), LUN Lun,
//	  at the guest path ContainerPath (C:\…): the Files/ of the disk's file system folder
//	  (emuvhdx.Header.FileSystem; the Linux snapshotter's sandbox.vhdx names its own folder, so
//	  a container's scratch snapshot is attached as hcsshim attaches <scratch>\sandbox.vhdx).
//	CombinedLayers Add/Remove {ContainerRootPath, Layers}: ContainerRootPath must be a mapped
//	  virtual disk's path, each Layers[].Path a live VSMB share path (schema2.VSMBGuestPath) of
//	  a layer folder; the container's file system (C:\) is then at ContainerRootPath.
//	MappedDirectory Add/Remove {HostPath: a VSMB share path, ContainerPath: a guest path}.
//	NetworkNamespace Add/Remove {the HNS namespace's document}: the guest knows that namespace
//	  (one per VM); hosted containers naming it in Container.Networking.Namespace run in it.
//	Network Add {AdapterId, RequestType: PreAdd, Settings: the HNS endpoint} (guest only, before
//	  the NIC's host Add), Add {AdapterId, RequestType: Add} with the host Add, Remove
//	  {AdapterId, RequestType: Remove} with the host Remove (hcsshim internal/uvm/network.go).
//
// Networking (vm_network_linux.go): a VM has a network namespace of its own from create to stop
// (<root>/netns/vm-<runtime id>, loopback up), in which its init, its processes and all its
// hosted containers run, so the containers of a pod share localhost. A NIC is an HNS endpoint:
// its Add moves the endpoint's container-side link from its HNS namespace's netns into the
// VM's, with its address, MAC and routes, as HNS hands a VM's NIC the endpoint's vSwitch port;
// Remove moves it back (or removes it, for an endpoint in no HNS namespace). The endpoint stays
// an HNS object throughout. When the VM stops (shutdown, terminate, crash) its NICs are
// unplugged the same way and its namespace removed. An unknown endpoint, a malformed id, one
// that is already a NIC (of any VM) or that containers of its HNS namespace use, a MacAddress
// that is not the endpoint's, or a NIC id in use are refused naming the field, changing nothing.
// A NIC can also be in the create document (Devices.NetworkAdapters). A hosted container with
// Container.Networking.Namespace must name the namespace the guest was given (hcsshim names
// the pod's namespace in every hosted container, internal/hcsoci/hcsdoc_wcow.go), else
// ERROR_NOT_FOUND; it does not join the HNS namespace on the host. Container.Networking.
// NetworkAdapters in a hosted container, and HCS v1 Network requests on one, are refused.
//
// Unknown fields anywhere are HCS_E_INVALID_JSON naming them (observed for guest requests,
// microsoft/hcsshim#2714). Assumptions (Microsoft documents none of these): an unknown
// ResourcePath, controller or a LUN outside 0–63 is E_INVALIDARG; a duplicate share name, an
// occupied LUN or a mount path in use is ERROR_ALREADY_EXISTS (0x800700B7); removing something
// absent is ERROR_NOT_FOUND (0x80070490); removing a share, disk, pipe or mount that a live hosted
// container, combined layers or mapped directory still uses (or the "os" share) is ERROR_BUSY
// (0x800700AA); shrinking memory below what the VM uses is E_INVALIDARG; a GuestRequest
// ResourceType other than the five above is E_NOTIMPL. For networks: the emulated guest has one
// network namespace (a second NetworkNamespace is E_NOTIMPL); a guest Add of an adapter without
// its PreAdd is ERROR_NOT_FOUND, one whose PreAdd named another endpoint E_INVALIDARG; removing
// the guest's namespace while NICs remain is ERROR_BUSY; a NIC whose MacAddress is not its
// endpoint's is E_INVALIDARG; an endpoint in use elsewhere is HCN_E_ENDPOINT_ALREADY_ATTACHED.
// hcsshim's removeNIC sends its guest part without a ResourceType (since microsoft/hcsshim#257);
// what a Windows guest does with that is not known, and the emulator refuses it
// (HCS_E_INVALID_JSON) rather than guess: runhcs names it "Network".
//
// Hosted containers: HcsCreateComputeSystem(id, {SchemaVersion, Owner, HostingSystemId: <VM id>,
// HostedSystem: {SchemaVersion, Container}}): the VM must exist (HCS_E_SYSTEM_NOT_FOUND) and run
// (HCS_E_INVALID_STATE); Container.Storage.Path must be a guest path where CombinedLayers were
// applied; Storage.Layers[].Path VSMB share paths of that VM; MappedDirectories[].HostPath a VSMB
// share path (a share with ReadOnly maps read-only; a RestrictFileAccess share maps only its
// AllowedFiles, one file each at a file ContainerPath, as hcsshim's file mounts do, and anything
// else of it is E_ACCESSDENIED) or a guest path; MappedPipes[].HostPath schema2.VSMBGuestPipePath
// of a pipe added to the VM (its processes reach the host pipe as a process-isolated container's
// do, pipes_linux.go). The image's build (OSBuildFile in the base layer, the last of
// Storage.Layers) must not be newer than the VM's, else HCS_E_IMAGE_MISMATCH. Its processes run in the VM's
// namespaces, except that each has a UTS namespace named after the container's GuestOs.HostName
// when it has one (each container in the VM is a silo with its own computer name; hcsshim sends
// the pod's host name there), in a cgroup nested in the VM's (Container.Memory and Processor apply inside the
// VM's own limits). A process-isolated container whose image build the host does not run fails
// to create with HCS_E_IMAGE_MISMATCH ("the operating system of the container does not match the
// operating system of the host", naming both builds): the builds must be equal, except that a
// host from Windows Server 2022 on also runs images from the latest LTSC before it up to its own
// build (a 2025 host runs 2022 images; VirtDocs version-compatibility, processIsolationRuns).
//
// OS builds: the host's is --os-version; a layer's is the first line of OSBuildFile,
// Windows\System32\hcsemu-osbuild.txt, under its Files\ (and UtilityVM\Files\ for the VM it
// boots) — the emulator's convention, written by test/image (image.OSBuildFile), since the real
// record (the SOFTWARE hive) cannot be read here. Builds compare by their third component.
//
// DNS (dns.go, dns_linux.go): an HNS endpoint keeps its Dns (Domain, Search, ServerList, Options;
// v1's DNSDomain, DNSSuffix and DNSServerList are the same settings as comma-separated lists),
// servers checked as IP addresses and suffixes as single names. A container's network adapters
// have their endpoints' settings, as Windows gives them to the container's adapters; the
// emulator's convention, beside the OS-build file: when a container starts, and when an endpoint
// joins or leaves a running one, hcsemu writes them into its C:\etc\resolv.conf
// (ResolvConfFile): a comment line per adapter (its MAC, connection-specific suffix and servers,
// which the test workload's ipconfig stand-in prints), nameserver lines, one search suffix (the
// first adapter's Domain or first Search; Windows applies one suffix) or the document's
// Networking.DnsSearchList, and options ndots:1 (Windows takes a dotted name as fully
// qualified). A process-isolated container's adapters are its HNS namespace's endpoints, a
// hosted container's its VM's NICs. So a Linux workload's resolver follows the pod's DNS config.
//
// Service properties: "ProcessorTopology" answers LogicalProcessorCount = --host-processors
// (default: this machine's). Properties of a VM: "Statistics" and "Memory" from the VM's cgroup
// (Memory.VirtualMachineMemory.AssignedMemory in 4 KiB pages = SizeInMB), "GuestConnection"
// (GuestConnectionInfo), "ProcessList" (the VM's own processes, its init among them, not its
// containers'; host pids, as HcsCreateProcess returns them), RuntimeId and "SystemGUID" (a GUID
// per system incarnation).
//
// Daemon flags: --os-version, --host-memory-mb (default: this machine's memory),
// --host-processors (default: this machine's logical processors).
//
// The host's performance figures (hostperf_linux.go, wire.MethodGetHostPerformance, an emulator
// method the stand-in pdh.dll asks, no Windows call): processor time, private working set and
// committed memory of the emulated host's processes (those in its network namespace and its
// compute systems' cgroups), its processors and memory as above, and its adapters (the
// interfaces of its namespace but loopback), cumulative, for PDH's counters.
//
// Users (users.go, users_linux.go): the container's own SAM, the accounts of a Windows base image,
// each a distinct Linux identity inside the container. ProcessParameters.User names one, alone or
// as "Domain\Name", case-insensitively; empty is ContainerAdministrator. Anything else fails
// HcsCreateProcess with ERROR_LOGON_FAILURE (0x8007052E, "The user name or password is
// incorrect", as Windows answers a docker --user the container lacks: docker/for-win#636).
//
//	account (whoami)                      uid  gid  may write the layers' files
//	User Manager\ContainerAdministrator      0    0  yes (the daemon's own identity)
//	User Manager\ContainerUser            1000  545  no
//	NT AUTHORITY\SYSTEM                     18    0  yes (CAP_DAC_OVERRIDE and friends, ambient)
//	NT AUTHORITY\LOCAL SERVICE              19  545  no
//	NT AUTHORITY\NETWORK SERVICE            20  545  no
//
// (18, 19 and 20 are the RIDs of the NT AUTHORITY SIDs, 545 that of BUILTIN\Users.) Every account
// but uid 0 has CAP_NET_BIND_SERVICE: Windows has no privileged ports. The emulator's convention
// for "only administrators may write here": a file or folder owned by uid 0 and not writable by
// others, which is what every file of a layer is (the layer importer and the snapshotter write
// them as root, folders 0755), as Windows restricts its system folders to Administrators and
// SYSTEM. A process sees its account's environment under the Environment it was given (which
// wins): USERNAME, USERDOMAIN, USERPROFILE, APPDATA, LOCALAPPDATA, TEMP, TMP, HOMEDRIVE and
// HOMEPATH, as Windows sets them (Microsoft's "Recognized environment variables"). The first
// process of an account other than ContainerAdministrator creates its profile folders
// (USERPROFILE, its AppData\Roaming and AppData\Local\Temp) owned by it, as Windows' User
// Profile Service does at a first logon, so an account may always write its own profile.
// Assumption: the NT AUTHORITY accounts' USERNAME and USERDOMAIN are shown as whoami names them
// (SYSTEM, NT AUTHORITY); Windows gives SYSTEM's processes the machine account instead.
//
// gMSA (ccg.go): HcsModifyServiceSettings with PropertyType "ContainerCredentialGuard" adds
// (AddInstance: Id, CredentialSpec, Transport "LRPC" or "HvSocket") and removes (RemoveInstance:
// Id) Container Credential Guard instances, as hcsshim's internal/credentials drives them; the
// service property "ContainerCredentialGuard" lists them (ContainerCredentialGuardSystemInfo).
// Instances live until removed or the daemon ends, as they live until vmcompute exits. A
// container's Container.ContainerCredentialGuard must be the state of an instance (its
// RpcEndpoint and Cookie), else the create fails with E_INVALIDARG. An instance of transport
// HvSocket also has an HvSocketConfig {ServiceId (a new GUID), ServiceConfig}: a container hosted
// in a utility VM must name an HvSocket instance whose ServiceId is in its VM's HvSocket service
// table (the VM document's, then Update at .../ServiceTable/<GUID>; an Update with Disabled and
// no descriptors, or a Remove, takes it out; a Remove while a hosted container uses it is
// ERROR_BUSY, of an absent one ERROR_NOT_FOUND), and a process-isolated one an LRPC instance;
// otherwise E_INVALIDARG (assumptions: undocumented; hcsshim adds the service before it creates
// the container, hcsoci/resources_wcow.go). The credential spec is checked
// field by field (schema2.ParseCredentialSpec). Assumptions (undocumented codes): a duplicate Id
// is ERROR_ALREADY_EXISTS, removing an unknown one ERROR_NOT_FOUND, a bad spec or transport and a
// container naming no instance E_INVALIDARG; the other service settings (Memory, CpuGroup, cache
// allocation) are E_NOTIMPL. A gMSA container's processes keep their account (whoami in a gMSA
// container shows user manager\containeradministrator: microsoft/nav-docker#292) and see their
// domain: USERDNSDOMAIN the spec's DnsName in upper case (assumption) and, the emulator's
// convention since Windows shows it only through Kerberos, HCSEMU_NETWORK_IDENTITY the account the
// container authenticates as on the network, "NETBIOS\<first gMSA's Name>$" (test/workload
// whoami prints it).
//
// Like vmcompute, the daemon keeps systems alive across the death of the client that made them:
// any client can open one by id. A stopped system is forgotten when its last handle closes. If
// the daemon dies, its processes die with it and every client sees its systems exit.
package hcsemu
