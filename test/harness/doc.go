// Package harness is the shared test harness of runhcs's Linux suites (test/e2e, test/soak,
// test/bench, and the demo program test/cmd/demo): it runs the end-to-end environment, starting
// hcsemu, the wcow snapshotter and a real containerd (2.x or 1.7, the pinned builds of
// hack/tools.sh) under a temporary root with a generated config, waits until they answer,
// imports the Windows-format test image (package test/image) and hands tests ctr and the
// containerd Go client. A suite imports this package, never another suite's files.
//
// Start registers a cleanup that always runs, on success, failure or panic, and on SIGINT or
// SIGTERM when the test binary's TestMain calls Main: it removes containers and tasks, stops the
// daemons (SIGTERM, then SIGKILL), kills every process still running in the temporary root (shims,
// and container processes chrooted under it), unmounts everything mounted under it and removes
// it. When the test failed it first prints the tails of all daemon logs.
//
// A suite package has
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// and starts one environment per top-level test with Start (subtests share it). Env.Ctr runs ctr
// of the containerd under test; Env.CtrRun runs `ctr run --rm` of an image with the runhcs
// runtime and the wcow snapshotter (with containerd 2.x's ctr for both versions, see Binaries);
// Env.RunWithClient does the same with containerd's Go client; Env.Client hands out clients;
// Env.ImportImage imports more images (package test/image writes them, Workload gives the
// workload binary to put in them; TestImage and Env.ImportTestImage do both).
//
// Helpers the suites share: WatchTaskEvents (containerd's TaskExit and TaskDelete events from a
// subscription known to be live), Churn (a bounded worker pool that stops at the first failure),
// SyncBuffer and ExitCode (a task's output and exit), Env.Residue (what the environment holds
// beyond its idle state, found where the emulator says it keeps it: package
// internal/hcsemu/layout) and Env.DaemonStats.
//
// Environment:
//
//	RUNHCS_E2E_CONTAINERD  "2" (default) or "1.7": which containerd to run
//	RUNHCS_BIN             folder with prebuilt containerd-shim-runhcs-v1, containerd-wcow-snapshotter
//	                       and hcsemu (default: built from this checkout into a temporary folder)
//	RUNHCS_CONTAINERD, RUNHCS_CTR  containerd and ctr binaries (default: hack/tools.sh builds them)
//	CI                     "true": tests that need root fail instead of skipping
//
// Everything here is Linux-only (it is the emulator's world); the package is empty elsewhere.
package harness
