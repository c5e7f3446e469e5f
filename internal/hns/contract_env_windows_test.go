package hns

import (
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/testenv"
)

// The contract suite's environment on Windows, as `make test-windows` provides it under Wine:
// the real computenetwork bindings (DefaultAPI) load hack/wine's stand-in computenetwork.dll and
// vmcompute.dll (HNSCall), which forward every call to an hcsemu that test.sh started on Linux,
// as root, and serves on loopback TCP (HCSEMU_TCP_ADDRESS). Without that address the suite
// skips, and fails in CI. On a real Windows host the DLLs are Microsoft's and the suite would
// run against the real HNS; it has not been run there yet.
func requireContract(t *testing.T) *Client {
	t.Helper()
	if os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if testenv.InCI() {
			t.Fatal("HCSEMU_TCP_ADDRESS is not set: run the suite through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows starts hcsemu and sets HCSEMU_TCP_ADDRESS when run as root")
	}
	api, err := DefaultAPI()
	if err != nil {
		t.Fatalf("HNS: %v", err)
	}
	return NewClient(api)
}

// emulatedHost returns what the traffic tests need of the emulated Windows host (see the Linux
// version): a /bin/sh script run in its network namespace through hcsemu hostns (hostNamespace,
// winbridge_windows_test.go), hcsemu's root and the Linux workload program test.sh put in the
// test image, both Linux paths.
func emulatedHost(t *testing.T) (run func(script string) (string, error), root, workload string) {
	t.Helper()
	requireContract(t)
	image := os.Getenv("RUNHCS_WINE_IMAGE")
	root = os.Getenv("RUNHCS_WINE_HCSEMU_ROOT")
	if image == "" || root == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_IMAGE and RUNHCS_WINE_HCSEMU_ROOT are not set: run the test through make test-windows as root")
		}
		t.Skip("no emulated host to enter: make test-windows sets RUNHCS_WINE_IMAGE when run as root")
	}
	host := hostNamespace(t, image)
	run = func(script string) (string, error) { return host("/bin/sh", "-c", script) }
	return run, filepath.ToSlash(root), path.Join(filepath.ToSlash(image), "workload", "workload.exe")
}
