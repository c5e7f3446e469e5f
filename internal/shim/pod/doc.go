// Package pod owns what one shim serves: one pod (containerd starts one shim per
// io.kubernetes.cri.sandbox-id), after hcsshim's pod type (cmd/containerd-shim-runhcs-v1/pod.go).
// A Pod holds the pod's tasks (internal/shim/task, one type per kind behind task.Task), its
// isolation, for a Hyper-V pod its sandbox task and the utility VM that sandbox owns, whose
// network is the pod's, and for a pod run through containerd's sandbox API its sandbox
// (internal/shim/sandbox), which owns the pod's network namespace; and it applies the pod's
// rules:
//
//   - a Hyper-V pod has one sandbox, which names itself (a second is refused);
//   - a Hyper-V pod's containers are hosted in its VM, and must name its sandbox;
//   - a process-isolated container in a Hyper-V pod is refused (hcsshim's pod.CreateTask
//     refuses a container whose isolation differs from its pod's);
//   - a Hyper-V task outside a pod (no CRI annotations) gets a VM of its own (task.Standalone);
//   - a shim serves one sandbox-API sandbox, and a container joins it only while it is ready;
//   - a pod whose sandbox is a HostProcess container (task.JobContainer) is a HostProcess pod:
//     its containers are all HostProcess containers, and no other pod's is (Kubernetes' rule,
//     enforced by containerd's CRI before a shim is asked, and here for other clients).
//
// The task service (internal/shim) translates a Create request into a task's configuration and
// hands it to the Pod, which creates the task of the right kind: a task ID is reserved while it
// is created, so no lock is held across an HCS call. A sandbox-API Hyper-V sandbox's VM is a
// Hyper-V pod's sandbox task made with CreateAPIVM: the pod's containers are hosted in it as
// in a pause-container pod, but containerd never hears of it as a task (its events are
// dropped; the sandbox API reports the pod's end).
//
// It imports internal/shim/task, internal/shim/sandbox, internal/uvm and internal/oci; nothing
// above them.
package pod
