// Package task owns the lifecycle of a shim's tasks (Windows containers, process-isolated or
// hosted in a Hyper-V pod's utility VM, and such a pod's sandbox) and of their processes: the
// state machines, the locks that guard them, and the HCS calls and events that go with each
// transition. The shim's task service (internal/shim) translates RPCs
// into calls of this package's methods (Task.Start, Task.Kill, Task.Delete, Process.Wait, …)
// and never sees a lock or a state; the compiler keeps it out, as in containerd's runc shim,
// whose task service never locks a process.
//
// Files:
//
//   - state.go: one type per state (created, starting, running, paused, stopped, deleted), as
//     in runc's process/init_state.go. Each answers every operation (start, kill, pause, …)
//     with the next state or an error naming the illegal transition, and every question callers
//     ask (may the console be resized? may the task be deleted while this exec is here?).
//     Nothing outside state.go asks which state a process is in.
//   - process.go: a process; its mu guards its state, and every transition is committed
//     through Process.transition. No lock is held across an HCS call: a call is made after a
//     transition into an intermediate state (starting) or after a check (kill, pause), and
//     its outcome committed afterwards. Exactly one TaskExit per process, published after its
//     stdio was drained.
//   - task.go: a task, its execs, and what happens when its init process exits (the execs are
//     killed, the compute system terminated).
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
//   - uvm.go: Hyper-V isolated pods (hcsshim's model): the sandbox task, which is the pod's
//     utility VM (internal/uvm) and no container (its init "process" is the VM's life; kill
//     stops the VM); containers hosted in that VM, whose layers, scratch, mounts and pipes
//     are borrowed from it and given back in reverse order on release, and which never stop
//     it; a Hyper-V task outside a pod, which owns a VM of its own (stopped last on release);
//     and the VM's exit, which ends every process of the pod with one TaskExit each.
//   - sandboxexec.go: execs in a Hyper-V pod's sandbox (containerd 1.7's port-forward runs
//     wincat.exe there): they run in the sandbox's own container, hosted in the VM from the
//     sandbox's image and spec at the first exec, and released before the VM.
//   - signals.go: what a signal means for a Windows process.
//   - types.go: the small interfaces it needs (Host, System, HCSProcess, Mounter, Events, HNS) and
//     Deps, what a task is given instead of a pointer to the service.
//
// It imports internal/hcs (errors only), internal/hns, internal/layers, internal/oci,
// internal/uvm and internal/shim/stdio; nothing above them.
package task
