// Command shimdiag is a client of the diag service every containerd-shim-runhcs-v1 serves beside
// its task API (containerd.runhcs.v1.diag.ShimDiag, protocols/diag): it finds the shims of a
// containerd and asks one for its goroutine stacks, its tasks and their processes, or its pid,
// or runs a process in (or shares a folder into) a Hyper-V pod's utility VM.
//
//	shimdiag list   [--namespace NS] [--state-dir DIR] [--timeout D]
//	shimdiag stacks [--timeout D] SHIM
//	shimdiag tasks  [--execs=false] [--timeout D] SHIM
//	shimdiag pid    [--timeout D] SHIM
//	shimdiag exec   [--workdir D] [--timeout D] SHIM ARG...
//	shimdiag share  [--readonly] [--timeout D] SHIM HOSTPATH VMPATH
//
// SHIM is a shim's address as `list` prints it and as the shim's start action recorded it: a
// unix socket (unix:///run/containerd/s/<hash>, or its bare path) on Linux, a named pipe
// (\\.\pipe\ProtectedPrefix\Administrators\containerd-shim-<namespace>-<pod>-pipe) on Windows,
// where a pipe name without the \\.\pipe\ prefix is taken under that protected prefix as
// hcsshim's shimdiag does.
//
// How list finds shims (list.go): containerd keeps one bundle per task under its state
// directory, <state>/io.containerd.runtime.v2.task/<namespace>/<task id> (the same in containerd
// 1.7 and 2.x), and every bundle of a running task has an `address` file naming its shim: the
// runhcs start action writes it for both versions, and containerd 2.x also records the address
// in bootstrap.json, which list reads when `address` is missing. The socket names themselves are
// hashes and cannot be traced back to a pod, so the bundles are the only reliable index. Tasks
// of one pod share a shim and are listed on its line. Each shim is then asked for its pid; a
// shim that does not serve the diag service (another runtime's, e.g. runc's) or does not answer
// is listed with the reason instead of a pid.
//
// exec and share need a Hyper-V pod's utility VM (a shim of a process-isolated pod answers them
// NotImplemented). exec runs a process in the VM itself, in no container, as hcsshim's
// shimdiag exec does; its output (stdout and stderr) reaches the client through a file the
// client names with a file:// URI, printed once the process ended, and a non-zero exit code is
// an error. share shares a host folder into the VM at VMPATH.
package main
