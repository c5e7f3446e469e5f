// Package sandbox owns the lifecycle of a pod sandbox that containerd runs through its sandbox
// API (containerd.runtime.sandbox.v1.Sandbox, a runtime handler with sandboxer = "shim", 2.x
// only): the state machine, the lock that guards it, the pod it runs and the state it leaves
// in its bundle for the shim's delete action. The shim's sandbox service (internal/shim)
// translates RPCs into this package's methods (Sandbox.Start, Stop, Wait, Shutdown, Status,
// Ping, Metrics, Join) and never sees a lock or a state, as internal/shim/task does for tasks.
//
// Lifecycle (one type per state in state.go, after runc's process/init_state.go):
//
//	Create ──▶ created ──Start──▶ starting ──▶ ready ──Stop──▶ stopping ──▶ stopped ──Shutdown──▶ shut down
//	              │                  │ (failed: created)│ the pod ends by itself (a VM crash) ▲
//	              └──Stop: stopped (never ran)──────────┴────────────────────────────────────┘
//
// Shutdown of a created, ready or stopping sandbox stops it first (containerd calls
// ShutdownSandbox after a failed Create or Start, and to roll back a RunPodSandbox). Wait
// returns once the sandbox is stopped, however it got there. Containers join only a ready
// sandbox. No lock is held across a call into the pod: a call is made after a transition into
// an intermediate state (starting, stopping) and its outcome committed afterwards.
//
// Files:
//
//   - state.go: the states; each answers every operation with the next state or an error
//     naming the illegal transition.
//   - sandbox.go: a sandbox, its transitions and its exit.
//   - bundle.go: the state a sandbox records in its bundle when it is created (before its pod
//     holds anything), and Cleanup, the delete action's part after a killed shim.
//   - process.go: the pod of a process-isolated sandbox: it holds the pod's network namespace
//     (made by containerd's Windows CRI with HNS before CreateSandbox, and removed by it) and
//     answers for the pod while its containers come and go.
//   - hyperv.go: the pod of a Hyper-V isolated sandbox, its utility VM: Start acquires the boot
//     image's layers (BootImage: with no pause container no rootfs reaches the shim, so the
//     VM boots from the handler's sandbox_image, recorded in the bundle before it is made) and
//     makes the VM (VMMaker); a VM crash ends the sandbox; Release frees the VM, then the image.
//   - types.go: the small interfaces it needs (Pod; BootImage, PodVM, VMMaker and, for
//     Cleanup, Releaser), implemented in internal/shim.
//
// It imports internal/atomicfile and protocols/stats; nothing above them.
package sandbox
