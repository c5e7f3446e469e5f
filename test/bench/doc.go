// Package bench measures runhcs against containerd's runc shim (containerd-shim-runc-v2) under
// the same containerd, side by side, and prints the figures as ratios runhcs/runc.
//
// BenchmarkShim (Linux, root) starts one end-to-end environment with test/harness (hcsemu,
// the wcow snapshotter and the pinned containerd 2.x), puts containerd-shim-runc-v2 on
// containerd's PATH, and imports two images built from the same static workload binary: the
// Windows-format test image (unpacked by the wcow snapshotter, run by io.containerd.runhcs.v1) and
// a one-layer linux/amd64 image with the binary at /workload (unpacked by overlayfs, run by
// io.containerd.runc.v2 and Debian's runc). Its sub-benchmarks are
//
//	run/runhcs, run/runc    container create → task create → start → exit of `workload echo x`
//	                        → task delete → container delete, one lifecycle per iteration
//	exec/runhcs, exec/runc  exec of `workload echo x` into a running task, to its exit and delete
//	compare                 both of the above for both runtimes, interleaved A/B per round (the
//	                        order flips every round), plus the serving shim's VmRSS; it prints a
//	                        table of medians and p90s with the ratios runhcs/runc
//
// BenchmarkHyperVPod (Linux, root; run with -benchtime=30x or more) times a pod's start to its
// container's first output, a Hyper-V pod's (its utility VM booted by hcsemu, the container
// hosted in it) beside a process-isolated pod's, interleaved, and reads the emulated VM init's
// RSS; it prints p50 and p90. They are emulator figures, not Hyper-V's.
//
// hack/bench-shim.sh builds the runc shim, installs runc if missing and runs compare. None of
// this is part of CI: `go test ./test/bench/` without -bench runs only the unit tests of the
// helpers (the image writer and the percentiles).
//
// What differs between the two sides, so that the ratios are read for what they are:
//
//   - Isolation work. runc creates namespaces (mount, pid, ipc, uts, network) for every container,
//     mounts /proc, /dev and /sys in it, pivots into its root, joins a group in each cgroup
//     hierarchy, and goes through runc twice (create, start) and once per exec (runc exec, which
//     enters the namespaces). hcsemu starts a process chrooted into the mounted volume, joins the
//     compute system's cgroups, and nothing else: no namespaces, no per-process mounts. The
//     emulator's processes are cheaper than runc's containers by construction, and far cheaper
//     than real HCS, which starts a server silo with its own system processes per container; a ratio below 1 says the shim and the
//     emulator add little, not that runhcs on Windows is faster than runc on Linux.
//   - The path to the process. runhcs goes shim → hcsemu over a unix socket (documents in JSON,
//     stdio handed over as file descriptors) and mounts the Windows layer chain with overlayfs at
//     task create; runc's shim forks runc, and containerd's overlayfs snapshotter gives the mount.
//   - Memory. hcsemu's RSS is shared by every runhcs shim and is printed apart, not added to the
//     shim's; runc has no such daemon (and runc itself is gone once the container started).
//   - The images carry the same workload binary, in the Windows layer format (a few more files:
//     the registry hive stand-ins and a second copy of the binary) and as one Linux layer. Image
//     import and unpack are not measured.
package bench
