// Package shim serves containerd's task API (v2 and v3) for one pod, and its sandbox API
// (containerd.runtime.sandbox.v1.Sandbox) for a pod run with sandboxer = "shim": RPC
// translation, events and the diag service. The pod it serves (its tasks, its isolation, a
// Hyper-V pod's sandbox and utility VM, and the pod's rules) is internal/shim/pod; tasks,
// processes and their state machines live in internal/shim/task, one type per kind behind the
// task.Task interface the service calls; the service never locks a process or sets its state. It drives compute systems through internal/hcs, mounts layers
// through internal/layers and translates specs through internal/oci. It imports nothing above
// it (docs/architecture.md, "Import rules").
//
// Layout, after containerd's runc shim:
//
//   - run.go: main — the start action, or containerd's own shim package (pkg/shim), which
//     serves the plugins, logs to containerd's shim log and publishes events.
//   - plugin.go: the task service (v2 and v3) and the diag service registered as a TTRPC
//     plugin of pkg/shim, with the shim's HCS client made in its init (runc: task/plugin/).
//   - start*.go: the `start` action (one shim per pod: a task naming a running pod's sandbox
//     joins that pod's shim; containerd 2.x, told bootstrap version 3, hands the pod's other
//     tasks to that shim without running it), done here because containerd keeps
//     *shim-runhcs-v1 binaries on the legacy start protocol that pkg/shim no longer speaks. start.go is the portable part
//     (it records the address in the bundle); start_unix.go and start_windows.go find or start
//     the pod's shim on a unix socket or a named pipe.
//   - manager.go: the `delete` action (cleanup after a dead shim: sandbox.Cleanup for a
//     sandbox's bundle, with a Hyper-V sandbox's VM ended by task.Cleanup and its boot image
//     released through containerd; task.Cleanup for a task's) and `-info`.
//   - service.go: the task API, one method per RPC and nothing else; service_v2.go serves the
//     same methods as containerd.task.v2.Task, which containerd 1.7 calls (2.x calls v3: the
//     start action tells the two apart, see start.go).
//   - sandbox_service.go: the sandbox API, one method per RPC: the pod's sandbox
//     (internal/shim/sandbox) without a pause container, which the pod's containers join as
//     tasks (pod.Join): a process-isolated pod, or a Hyper-V pod whose utility VM is made by
//     StartSandbox and hosts the pod's containers. The start action keeps the runtime options
//     of a sandbox bundle, which has no config.json, for CreateSandbox.
//   - bootimage.go: a Hyper-V sandbox's boot image through containerd's API (the handler's
//     sandbox_image, resolved to a read-only view under a lease of its own).
//   - create.go: the translation of a Create request (spec, options, layers) into a
//     task.Config, handed to the pod; hyperv.go that of a Hyper-V task: the pod's sandbox (its
//     utility VM, sized by oci.VMSizing from the options and annotations), a container in the
//     pod's VM, or a standalone task in a VM of its own; hostprocess.go that of a HostProcess
//     container (annotation microsoft.com/hostprocess-container), with its refusals (Hyper-V,
//     network, named-pipe mounts, no account, storage limits), handed to the pod as a
//     task.JobConfig over internal/hostprocess.
//   - events.go: the ordered queue that publishes events to containerd (task.Events).
//   - tasklog*.go: the shim log pipe containerd dials for each task (Windows), served for the
//     tasks that joined the pod's shim, whose delete would otherwise wait up to 5 s for it.
//   - diag.go: the containerd.runhcs.v1.diag.ShimDiag service (stacks, tasks, pid) on the
//     same ttrpc server; cmd/shimdiag is its client.
//   - host.go: binds task.Host to an internal/hcs Client (fakes in tests).
//   - pod/: the pod this shim serves: its tasks, its VM and its rules (see its doc.go).
//   - task/: tasks of each kind, processes and their lifecycle (see its doc.go).
//   - sandbox/: a sandbox-API sandbox's lifecycle (see its doc.go).
//   - stdio/: containerd's side of a process's stdio (FIFOs, named pipes, file://, binary://)
//     and the relay that drains it.
//
// Rules kept here (docs/architecture.md, "Robustness rules"): no lock is held across an HCS
// call; every HCS call has a context deadline; State, Pids and Connect answer within a second
// even when HCS is stuck; exactly one TaskExit per process, published after its stdio was
// drained.
package shim
