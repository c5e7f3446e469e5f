// Package soak is runhcs's soak and fault suite (issue 15): churn of container lifecycles,
// shim SIGKILLs at random points of the lifecycle, containerd and hcsemu restarts under
// running tasks, HCS calls stuck and failing by fault injection. Each step checks that nothing
// is left behind (harness.Env.Residue) and the suite checks that the long-lived daemons do not
// grow in file descriptors or goroutines. Linux, root, on the shared test harness (test/harness).
//
// `make soak` runs the bounded CI variant against containerd 2.x and 1.7; RUNHCS_SOAK=long runs
// the long one (500 cycles, 100 shim kills, 20 containerd restarts). RUNHCS_SOAK_SEED repeats
// the random choices of a run (every run prints its seed).
package soak
