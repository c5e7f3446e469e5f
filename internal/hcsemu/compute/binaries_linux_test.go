package compute

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The programs the daemon tests run are built from this module once per test binary, into one
// temporary folder that TestMain removes: test/workload, the program the test images carry, which
// the tests run inside compute systems, and cmd/hcsemu, which they run as a daemon of its own.
var (
	workloadBinary = &testBinary{pkg: "../../../test/workload", name: "workload.exe"}
	hcsemuBinary   = &testBinary{pkg: "../../../cmd/hcsemu", name: "hcsemu"}
)

// testBinary is one program built for the tests.
type testBinary struct {
	pkg  string // relative to this package's folder, where go test runs
	name string // file name in the build folder

	once sync.Once
	path string
	err  error
}

var (
	buildDirOnce sync.Once
	buildDir     string
	buildDirErr  error
)

// build returns the path of b's binary, building it on first use. Builds are static
// (CGO_ENABLED=0) because the workload runs chrooted in a volume with no C library; the daemon
// does not need cgo either.
func (b *testBinary) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		buildDirOnce.Do(func() { buildDir, buildDirErr = os.MkdirTemp("", "hcsemu-test-bin-") })
		if buildDirErr != nil {
			b.err = buildDirErr
			return
		}
		b.path = filepath.Join(buildDir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// TestMain first lets the test binary be the helpers the engines under test re-execute it as
// (Reexec: a silo init, a VM init), then runs the tests and removes the build folder (a helper
// process run by TestDaemonOutOfProcess builds nothing and so leaves nothing).
func TestMain(m *testing.M) {
	if code, ok := Reexec(); ok {
		os.Exit(code)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
