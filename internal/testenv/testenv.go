// Package testenv is the one gate for tests that need root (mounts, chroot, cgroups, trusted.*
// xattrs): they skip on a developer's machine when not root, and fail under CI=true, where
// nothing may be skipped. It is imported by tests and the test harness (test/harness) only.
package testenv

import (
	"os"
	"testing"
)

// InCI reports whether the tests run in CI ($CI is "true"), where a test that cannot run must
// fail rather than skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireRoot returns when the process is root. Otherwise it fails tb under CI=true, and skips
// it elsewhere; need says what the test needs root for.
func RequireRoot(tb testing.TB, need string) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if InCI() {
		tb.Fatalf("needs root (%s), and CI=true must not skip it", need)
	}
	tb.Skipf("needs root (%s)", need)
}
