package hns

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// TestSystemNamespaceNothingHalfMade checks, without root, the namespace the emulator makes
// for a container's NetworkAdapters: when attaching the second endpoint fails in the
// dataplane, the first is detached and the namespace is gone; when it succeeds, v1 lists the
// container among each endpoint's SharedContainers, and deleting it detaches the endpoints and
// keeps them.
func TestSystemNamespaceNothingHalfMade(t *testing.T) {
	dp := newFakeDataplane()
	h := newService(dp, build2022)
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("sys-net", "10.254.9.0/24", "10.254.9.1"))
	if err != nil {
		t.Fatal(err)
	}
	ep1, err := h.CreateEndpoint(ctx, netID, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	ep2, err := h.CreateEndpoint(ctx, netID, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	field := func(i int) string { return fmt.Sprintf("NetworkAdapters[%d]", i) }

	// The first attach succeeds, the second fails.
	calls := 0
	h.dp = &countingDataplane{fakeDataplane: dp, failAttach: 2, attaches: &calls}
	_, _, err = h.SystemNamespace(ctx, "sys-a", []string{ep1, ep2}, field)
	wantHRESULT(t, err, computenetwork.E_FAIL, "NetworkAdapters[1]")
	if len(dp.namespaces) != 0 || len(dp.attached) != 0 || len(h.namespaces) != 0 {
		t.Fatalf("left behind: netns %v, attached %v, namespaces %d", dp.namespaces, dp.attached, len(h.namespaces))
	}
	h.dp = dp

	id, _, err := h.SystemNamespace(ctx, "sys-a", []string{ep1, ep2}, field)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{ep1, ep2} {
		var resp struct{ Output hcn.HNSEndpoint }
		if err := json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpoints/"+ep, "")), &resp); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(resp.Output.SharedContainers, []string{"sys-a"}) {
			t.Errorf("endpoint %s: SharedContainers %v; want [sys-a]", ep, resp.Output.SharedContainers)
		}
	}
	// An endpoint in that namespace cannot be listed for another container.
	_, _, err = h.SystemNamespace(ctx, "sys-b", []string{ep2}, field)
	wantHRESULT(t, err, computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, "NetworkAdapters[0]")
	h.DeleteSystemNamespace(ctx, id)
	if len(dp.namespaces) != 0 || len(dp.attached) != 0 || len(h.endpoints) != 2 {
		t.Errorf("after deleteSystemNamespace: netns %v, attached %v, %d endpoints; want none, none, 2", dp.namespaces, dp.attached, len(h.endpoints))
	}
}

// countingDataplane fails the failAttach-th attach.
type countingDataplane struct {
	*fakeDataplane
	failAttach int
	attaches   *int
}

func (c *countingDataplane) attach(ep *hnsEndpoint, ns *hnsNamespace, index int) error {
	*c.attaches++
	if *c.attaches == c.failAttach {
		c.fakeDataplane.fail = "attach"
	}
	return c.fakeDataplane.attach(ep, ns, index)
}
