// Package uvm owns a Hyper-V isolated pod's utility VM: its HCS document, its lifetime and the
// resources that containers hosted in it borrow from it. It follows hcsshim's WCOW utility VM
// (internal/uvm in Microsoft's hcsshim) over the HCS-mediated guest channel that Microsoft's
// schema reference documents (docs/architecture.md, "Isolation"; docs/notes/hyperv.md §1–§3).
//
// # Lifecycle
//
// A pod's VM is made for its sandbox task. Its Options are typed and already checked: the size
// comes from internal/oci (oci.VMSizing reads the sandbox spec's
// io.microsoft.virtualmachine.computetopology.* annotations, then the runtime options
// (vm_memory_size_in_mb, vm_processor_count), then spec.windows.resources, then hcsshim's
// defaults, refusing bad values by field and value), the boot layer from FindBootLayer.
// Document builds the VM document: it boots from the pause image's uppermost layer that has a
// UtilityVM folder (its UtilityVM\Files is the VSMB share "os", booted through VmbFs), with the
// utility VM scratch of the sandbox snapshot at SCSI controller 0, LUN 0, when there is one.
//
// Create creates the compute system <pod id>@vm; Start starts it; from then on the VM is
// running until Terminate, or until it exits by itself (a crash: Exited is closed). Close
// releases the handle. The states are in state.go: created, running, stopped, closed; every
// operation asks the state, and resources may be added only while the VM is running.
//
// # Resources
//
// Containers hosted in the VM borrow from it, and every borrow is reference counted, so two
// containers with a common layer share one VSMB share, and a share goes only when its last
// user releases it:
//
//   - vsmb.go: VSMB shares, one per host folder and read-only flag, named s<hex> (as hcsshim
//     names them); a single file is shared through its folder with RestrictFileAccess and
//     SingleFileMapping, the allowed files growing with Update.
//   - scsi.go: SCSI disks on controller 0 (LUN 0 is the VM's own scratch), each attached and
//     then mounted in the guest (MappedVirtualDisk) at c:\mounts\scsi\m<n>.
//   - pipes.go: host named pipes mapped into the VM (VirtualMachine/Devices/MappedPipes).
//   - hvsocket.go: HvSocket service table entries (a gMSA container's Container Credential
//     Guard instance), one user each, added and removed with the container.
//   - layers.go: a container's storage: a share per read-only layer, the scratch on SCSI and the
//     layers combined in the guest (CombinedLayers); Release undoes it in reverse order.
//   - network.go: the pod's HNS namespace added to the guest and its endpoints as NICs of the
//     VM (hcsshim's AddNetNS / AddEndpointsToNS / addNIC), reference counted by namespace and
//     removed, NICs last first, by RemoveNetwork or before the VM stops (Terminate).
//   - stats.go: the VM's statistics (the "vm" part of the shim's stats).
//
// No lock is held across an HCS call: the VM's mutex guards its tables only; an addition
// reserves its entry (so a concurrent user of the same resource waits for it), makes the call,
// and commits or rolls back. When the VM is gone, releases succeed without HCS (hcsshim#2743:
// a release that fails because the VM is gone must not leave a task undeletable).
//
// It imports internal/hcs/schema2, internal/hcs (to recognise "gone" errors), internal/oci
// (layer ids, the VM size), internal/hns and its documents (a namespace's endpoints) and
// protocols/stats; nothing above them. The interfaces it needs of a compute system are in
// types.go.
package uvm
