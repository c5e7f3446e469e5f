// Package e2e holds the end-to-end suites: each test starts hcsemu, the wcow snapshotter and a
// real containerd with the shared test harness (test/harness) and drives them the way users do, with ctr, containerd's
// Go client and (in later suites) the CRI client. They need root and Linux; in CI they never skip.
// Run them with `make e2e`, or `go test ./test/e2e/...` with RUNHCS_E2E_CONTAINERD=2 or 1.7.
package e2e
