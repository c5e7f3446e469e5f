package hns

import (
	"os"
	"testing"

	"github.com/openhcs/runhcs/internal/testenv"
)

// requireContract on Windows uses the real computenetwork.dll (or, under Wine, a stand-in for
// it: not written yet, see the README). It skips where the DLL cannot be loaded, except in CI.
func requireContract(t *testing.T) *Client {
	t.Helper()
	api, err := DefaultAPI()
	if err != nil {
		if testenv.InCI() && os.Getenv("RUNHCS_HNS_CONTRACT") == "true" {
			t.Fatalf("HNS: %v", err)
		}
		t.Skipf("HNS not available: %v", err)
	}
	return NewClient(api)
}
