package hns

import (
	"os"
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
