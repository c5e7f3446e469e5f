package computenetwork_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/internal/wintest"
)

// These tests check what the stand-in computenetwork.dll (hack/wine/computenetwork) itself
// does, through the real bindings, against the hcsemu that make test-windows starts
// (HCSEMU_TCP_ADDRESS): the handle table, a document's UTF-16 round trip, the error record of
// a failure, and the functions it does not emulate. What HNS does is internal/hns's contract
// suite's business.

func standIn(t *testing.T) computenetwork.API {
	t.Helper()
	if !wintest.UnderWine() {
		t.Skip("the stand-in computenetwork.dll exists only in hack/wine's Wine prefix")
	}
	if os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if testenv.InCI() {
			t.Fatal("HCSEMU_TCP_ADDRESS is not set: run the test through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows starts hcsemu and sets HCSEMU_TCP_ADDRESS when run as root")
	}
	api, err := computenetwork.New()
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// The name carries characters outside ASCII and outside the BMP, so that the conversions both
// ways are checked.
const standInNetwork = `{"Name":"stand-in wïndows ☃ 😀","Type":"NAT","SchemaVersion":{"Major":2,"Minor":0},` +
	`"Ipams":[{"Type":"Static","Subnets":[{"IpAddressPrefix":"10.251.40.0/24",` +
	`"Routes":[{"NextHop":"10.251.40.1","DestinationPrefix":"0.0.0.0/0"}]}]}]}`

func TestStandInHandles(t *testing.T) {
	api := standIn(t)
	h, err := api.CreateNetwork(computenetwork.GUID{}, standInNetwork)
	if err != nil {
		t.Fatal(err)
	}
	props, err := api.QueryNetworkProperties(h, "{}")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ ID, Name string }
	if err := json.Unmarshal([]byte(props), &doc); err != nil {
		t.Fatalf("properties %q: %v", props, err)
	}
	id, err := computenetwork.ParseGUID(doc.ID)
	if err != nil {
		t.Fatalf("properties %s: %v", props, err)
	}
	t.Cleanup(func() { api.DeleteNetwork(id) })
	if doc.Name != "stand-in wïndows ☃ 😀" {
		t.Errorf("name %q came back as %q", "stand-in wïndows ☃ 😀", doc.Name)
	}

	// A second handle on the same network, by id; each is closed once.
	h2, err := api.OpenNetwork(id)
	if err != nil {
		t.Fatal(err)
	}
	if h2 == h {
		t.Errorf("OpenNetwork returned the create's handle %#x again", h)
	}
	// A network handle is not an endpoint or namespace handle.
	if _, err := api.QueryEndpointProperties(computenetwork.Endpoint(h), "{}"); !errors.Is(err, computenetwork.E_HANDLE) {
		t.Errorf("a network handle used as an endpoint's: %v, want E_HANDLE", err)
	}
	if err := api.CloseNetwork(h); err != nil {
		t.Fatal(err)
	}
	if err := api.CloseNetwork(h); !errors.Is(err, computenetwork.E_HANDLE) {
		t.Errorf("a second close: %v, want E_HANDLE", err)
	}
	if _, err := api.QueryNetworkProperties(h, "{}"); !errors.Is(err, computenetwork.E_HANDLE) {
		t.Errorf("a query on a closed handle: %v, want E_HANDLE", err)
	}
	if _, err := api.QueryNetworkProperties(h2, "{}"); err != nil {
		t.Errorf("the other handle, after the first was closed: %v", err)
	}
	if err := api.CloseNetwork(h2); err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateEndpoint(h2, computenetwork.GUID{}, "{}"); !errors.Is(err, computenetwork.E_HANDLE) {
		t.Errorf("an endpoint on a closed network handle: %v, want E_HANDLE", err)
	}
}

func TestStandInErrorRecord(t *testing.T) {
	api := standIn(t)
	unknown, _ := computenetwork.ParseGUID("0b0e5f3c-1111-4222-8333-944455556666")
	_, err := api.OpenNetwork(unknown)
	var ce *computenetwork.Error
	if !errors.As(err, &ce) || ce.HResult != computenetwork.HCN_E_NETWORK_NOT_FOUND {
		t.Fatalf("open of an unknown network: %v, want HCN_E_NETWORK_NOT_FOUND", err)
	}
	// The record is the daemon's, whole: it names the id.
	if !strings.Contains(ce.Result, "0b0e5f3c-1111-4222-8333-944455556666") {
		t.Errorf("error record %q does not name the id", ce.Result)
	}
	_, err = api.CreateNetwork(computenetwork.GUID{}, `{"Name":"stand-in-bad","Type":"Bridgey"}`)
	if !errors.As(err, &ce) || ce.HResult != computenetwork.HCN_E_INVALID_NETWORK_TYPE || !strings.Contains(ce.Result, "Type") {
		t.Errorf("a bad network type: %v, want HCN_E_INVALID_NETWORK_TYPE naming Type", err)
	}
}

func TestStandInHNSCall(t *testing.T) {
	api := standIn(t)
	out, err := api.HNSCall("GET", "/globals/version", "")
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Success bool
		Output  struct{ Major, Minor int }
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || !resp.Success || resp.Output.Major == 0 {
		t.Errorf("GET /globals/version: %q (%v)", out, err)
	}
	// HNS refuses a v1 request in the response, with a successful HRESULT.
	out, err = api.HNSCall("GET", "/endpoints/0b0e5f3c-1111-4222-8333-944455556666", "")
	if err != nil {
		t.Fatalf("a refused v1 request failed the call: %v", err)
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Success {
		t.Errorf("GET of an unknown endpoint: %q (%v), want Success false", out, err)
	}
}
