package hcsemu

import (
	"context"
	"encoding/json"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// HCS's schema 1 modify request. HcsModifyComputeSystem takes it from callers of the v1 schema:
// hcsshim sends every document, v1 or v2, through vmcompute.dll's HcsModifyComputeSystem, and
// its HotAttachEndpoint and HotDetachEndpoint (the CNI plugins' default mode, win-bridge
// without ApiVersion 2) send {"ResourceType":"Network","RequestType":"Add"|"Remove",
// "Settings":"<endpoint id>"} (hcsshim hnsendpoint.go modifyNetworkEndpoint,
// internal/hcs/schema1 ResourceModificationRequestResponse). The service tells the schemas
// apart by their fields: a v2 ModifySettingRequest has ResourcePath, a v1 request ResourceType.

// v1ModifyRequest is schema 1's ResourceModificationRequestResponse.
type v1ModifyRequest struct {
	ResourceType string          `json:"ResourceType"`
	RequestType  string          `json:"RequestType,omitempty"`
	Settings     json.RawMessage `json:"Settings,omitempty"`
}

// isV1ModifyRequest says a modify document is schema 1's: it has ResourceType and no
// ResourcePath. Anything else is decoded as a v2 ModifySettingRequest, which refuses a
// document that mixes both naming the field.
func isV1ModifyRequest(doc string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(doc), &m) != nil {
		return false
	}
	_, v1 := m["ResourceType"]
	_, v2 := m["ResourcePath"]
	return v1 && !v2
}

// modifyV1 applies a schema 1 modify request. Of its resources only Network is emulated:
// adding or removing an HNS endpoint to or from the container's network namespace.
func (e *Engine) modifyV1(ctx context.Context, ref wire.SystemRef, doc string) error {
	var req v1ModifyRequest
	if err := decodeDocument(doc, &req, "ResourceModificationRequestResponse"); err != nil {
		return err
	}
	if req.ResourceType != "Network" {
		return errorf(computecore.E_NOTIMPL, "ResourceType: %q: of schema 1's modify requests the emulator serves Network only", req.ResourceType)
	}
	var add bool
	switch req.RequestType {
	case "Add":
		add = true
	case "Remove":
	default:
		return errorf(computecore.E_INVALIDARG, "RequestType: %q is not valid for ResourceType Network (Add, Remove)", req.RequestType)
	}
	var epID string
	if err := json.Unmarshal(req.Settings, &epID); err != nil || epID == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "Settings: %s: want the endpoint's id, a string", string(req.Settings))
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.state == schema2.StateStopped {
		return errorf(computecore.HCS_E_INVALID_STATE, "modify compute system %q: it has stopped", s.id)
	}
	if s.doc.Container == nil {
		return errorf(computecore.E_NOT_SUPPORTED, "ResourceType: Network: compute system %q is not a container", s.id)
	}
	if s.netnsID == "" {
		// On Windows every container has a network compartment of its own, and a hot-added
		// endpoint joins it. The emulator gives a compartment only to containers that name an
		// HNS namespace (Container.Networking.Namespace); the others run in the daemon's own
		// network namespace, which an endpoint must not enter (nothing of HNS is added to the
		// machine's network). So this is refused rather than half done.
		return errorf(computecore.E_NOTIMPL, "ResourceType: Network: compute system %q has no network namespace (Container.Networking.Namespace); "+
			"hot-adding endpoint %s to a container without one is not emulated", s.id, epID)
	}
	// The lock order is system → hns (hns.go).
	if err := e.hns.systemEndpoint(ctx, s.netnsID, s.id, epID, add); err != nil {
		return err
	}
	log.G(ctx).WithFields(log.Fields{"system": s.id, "endpoint": epID, "request": req.RequestType}).Info("hcsemu: v1 network modify")
	return nil
}
