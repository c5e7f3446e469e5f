// Package shim serves containerd's task API (v2 and v3) and owns pods, tasks and
// execs: their state machines, events and stdio relays. It drives compute systems through
// internal/hcs, mounts layers through internal/layers and translates specs through
// internal/oci. It imports nothing above it (see DESIGN.md).
//
// Layout, after containerd's runc shim:
//
//   - run.go: main — the task service registered as a TTRPC plugin of containerd's own shim
//     package (pkg/shim), which serves it, logs to containerd's shim log and publishes events.
//   - start*.go: the `start` action (one shim per pod: a task naming a running pod's sandbox
//     joins that pod's shim), done here because containerd keeps *shim-runhcs-v1 binaries on
//     the legacy start protocol that pkg/shim no longer speaks. start.go is the portable part
//     (it records the address in the bundle); start_unix.go and start_windows.go find or start
//     the pod's shim on a unix socket or a named pipe.
//   - manager.go: the `delete` action (cleanup after a dead shim: terminate the compute system,
//     unmount the layers, remove the state) and `-info`.
//   - bundle.go: what a task records in its bundle for the delete action.
//   - service.go: the task API, one method per RPC and nothing else; service_v2.go serves the
//     same methods as containerd.task.v2.Task, which containerd 1.7 and 2.x call (see start.go).
//   - task.go, process.go: containers and their processes; state.go: their lifecycle, one
//     type per state (created, starting, running, paused, stopped, deleted) as in runc's
//     init_state.go, so an illegal transition is a method returning a clear error.
//   - diag.go: the containerd.runhcs.v1.diag.ShimDiag service (stacks, tasks, pid) on the
//     same ttrpc server; cmd/shimdiag is its client.
//   - hcs.go: the small interfaces the shim needs from internal/hcs and internal/layers
//     (fakes in tests); hcs_adapter.go binds them to the real package.
//   - stdio/: containerd's side of a process's stdio (FIFOs, named pipes, file://, binary://)
//     and the relay that drains it.
//
// Rules kept here (DESIGN.md, robustness): no lock is held across an HCS call; every HCS call
// has a context deadline; State, Pids and Connect answer within a second even when HCS is
// stuck; exactly one TaskExit per process, published after its stdio was drained.
package shim
