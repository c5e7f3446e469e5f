// Package hostprocess is the host side of HostProcess containers (Kubernetes'
// windowsOptions.hostProcess, hcsshim's "job containers"): the operating-system services a
// HostProcess task needs and nothing of the task's lifecycle, which is internal/shim/task's
// JobContainer. It is one Go interface (Host, with the Job and Process it makes) and one
// implementation per platform, as internal/computecore is for HCS:
//
//   - Windows (host_windows.go and the files it names): documented Win32 only — job objects
//     (CreateJobObjectW, SetInformationJobObject with JOBOBJECT_EXTENDED_LIMIT_INFORMATION and
//     JOBOBJECT_CPU_RATE_CONTROL_INFORMATION, AssignProcessToJobObject,
//     QueryInformationJobObject, TerminateJobObject), process creation under a logon token
//     (LogonUserW, CreateProcessAsUserW, pseudo consoles), the temporary local account for a
//     group (NetUserAdd, NetLocalGroupAddMembers, NetUserDel) and the bind filter
//     (BfSetupFilter/BfRemoveMapping through go-winio's pkg/bindfilter). hcsshim's silo
//     promotion and CtrlRoutine thread are undocumented and not used; the differences this makes
//     are in docs/notes/hostprocess.md §5.
//   - Linux, the Linux-native mode (host_linux.go, job_linux.go, process_linux.go): hcsemu's
//     emulated host, whose root $HCSEMU_ROOT names (internal/hcsemu/layout). A job is a cgroup
//     v1 group named after JobName (internal/cgroup1, as hcsemu's compute systems), ended by a
//     keeper process (keeper_linux.go, run by Reexec) when its creator dies, as a job object
//     with KILL_ON_JOB_CLOSE ends with its last handle; its processes are forked in the
//     emulated host's network namespace and the machine's mount and PID namespaces; accounts, console events and exit codes follow hcsemu's rules
//     (internal/winlinux); the emulated host's drives are the machine's root (localPath); Bind
//     is a bind mount. docs/hostprocess.md ("Where it runs") gives the decisions and reasons.
//   - elsewhere (host_other.go): New refuses with ErrNotImplemented; Reexec (keeper_other.go)
//     returns, there being no keeper.
//
// paths.go holds the platform-neutral rules: where a container's files appear on the host
// (RootfsLocation, MountPath) and the expansion of %CONTAINER_SANDBOX_MOUNT_POINT%; env.go the
// environment and program lookup both implementations share.
//
// It imports internal/hcs/schema2 (the process and statistics documents its Job and Process
// answer in, so that the task package uses them as it uses an HCS process), internal/winargs,
// and for the Linux host internal/cgroup1, internal/winlinux and internal/hcsemu/layout.
package hostprocess
