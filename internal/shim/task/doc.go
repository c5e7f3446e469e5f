// Package task owns the lifecycle of a shim's tasks and of their processes: the state
// machines, the locks that guard them, and the HCS calls and events that go with each
// transition. A task is one of six kinds, each its own type behind the one Task interface
// (after hcsshim's shimTask): Container (process-isolated), HostedContainer (a container of a
// Hyper-V pod, in the pod's utility VM), VMSandbox (a Hyper-V pod's sandbox, which is the pod's
// utility VM), Standalone (a Hyper-V task outside a pod, in a VM of its own), JobContainer
// (a HostProcess container: a job object on the host, internal/hostprocess) and
// HostProcessSandbox (a HostProcess pod's sandbox, which runs nothing). The pod that
// chooses the kind and hands a hosted container its VM is internal/shim/pod. The shim's task
// service (internal/shim) translates RPCs into calls of Task's methods (Start, Kill, Delete,
// Process(id).Wait, …) and never sees a lock, a state or a kind; the compiler keeps it out, as
// in containerd's runc shim, whose task service never locks a process. A new kind (the sandbox
// API's Hyper-V sandbox) is a new type implementing Task.
//
// Files:
//
//   - state.go: one type per state (created, starting, running, paused, stopped, deleted), as
//     in runc's process/init_state.go. Each answers every operation (start, kill, pause, …)
//     with the next state or an error naming the illegal transition, and every question callers
//     ask (may the console be resized? may the task be deleted while this exec is here?).
//     Nothing outside state.go asks which state a process is in.
//   - life.go: what every process shares whatever runs it (Proc, the service's view of it):
//     its state, committed through life.transition, its exit and its one TaskExit. No lock is
//     held across an HCS call: a call is made after a transition into an intermediate state
//     (starting) or after a check (kill, pause), and its outcome committed afterwards.
//   - process.go: a process in a compute system (a container's init process or an exec),
//     created in the system its task names (processHost); its TaskExit is published after its
//     stdio was drained.
//   - task.go: the Task interface and base, what every kind shares: the init process, the
//     execs, start, kill, delete, and the end of the execs when the init process exits.
//   - container.go: systemTask, what the kinds that are a compute system share (pause, pids,
//     update, stats, release on delete), and Container, a process-isolated container.
//   - hosted.go: HostedContainer and Standalone: containers hosted in a utility VM, whose
//     layers, scratch, mounts and pipes are borrowed from it and given back in reverse order on
//     release; a hosted container never stops its pod's VM, a standalone task owns its VM and
//     stops it last; the VM's exit ends every process of the task with one TaskExit each.
//   - vmsandbox.go: VMSandbox, a Hyper-V pod's sandbox: the pod's utility VM (internal/uvm),
//     which it owns and networks; its init is the VM's life (sandboxInit: pid 0, a kill stops the
//     VM), not a process; its Update resizes the VM and its stats are the VM's.
//   - sandboxinit.go: sandboxInit, the init of a sandbox that is no process (hcsshim's
//     wcowPodSandboxExec): pid 0, its exit when its life ends (a VM's stop, or a kill).
//   - hostprocesssandbox.go: HostProcessSandbox, a HostProcess pod's sandbox: no job, no files,
//     no process (a pod with the host's network has nothing for a sandbox to hold, and the
//     pause image's program would run on the host as no one's); it carries the pod's
//     HostProcess annotations to its containers.
//   - bundle.go: what a task records in its bundle for the delete action, and release, the one
//     path that ends what a task holds (terminate the compute system, a gone one being fine;
//     unmount the layers; remove the HNS namespace and the Container Credential Guard instance
//     the task made; remove the state), used by
//     Delete, by a failed Create and by the delete action (Cleanup).
//   - network.go: the HNS namespace a task makes for endpoints its spec lists without a
//     namespace (as hcsshim does), recorded in the bundle state as soon as it exists.
//   - ccg.go: the Container Credential Guard instance of a task with a gMSA credential spec
//     (transport LRPC for process isolation; HvSocket in a utility VM, whose HvSocket service
//     table then carries the instance's service while the task lives), recorded in the bundle
//     state before it is made.
//   - jobcontainer.go: JobContainer, a HostProcess container (hcsshim's job container): its
//     job (hostprocess.Job) behind jobSystem, which answers as a compute system does, so that
//     its processes, stdio, signals, pids, stats and updates are systemTask's; its image's files
//     bound at its location on the host (C:\hpc\<id>\), its mounts below them, and its logon
//     token (a temporary local account for a group), each recorded in the bundle state before it
//     exists and ended by release (by name after a killed shim).
//   - sandboxexec.go: execs in a Hyper-V pod's sandbox (containerd 1.7's port-forward runs
//     wincat.exe there): they run in the sandbox's own container, hosted in the VM from the
//     sandbox's image and spec at the first exec, and released before the VM.
//   - signals.go: what a signal means for a Windows process.
//   - types.go: the small interfaces it needs (Host, System, HCSProcess, Mounter, Events, HNS) and
//     Deps, what a task is given instead of a pointer to the service.
//
// It imports internal/hcs (errors only), internal/hns, internal/hostprocess, internal/layers,
// internal/oci, internal/uvm and internal/shim/stdio; nothing above them.
package task
