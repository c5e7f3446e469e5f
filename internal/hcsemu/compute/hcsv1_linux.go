package compute

import (
	"context"
	"encoding/json"
	"os"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
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
	if err := hresult.Decode(doc, &req, "ResourceModificationRequestResponse"); err != nil {
		return err
	}
	if req.ResourceType != "Network" {
		return hresult.Errorf(computecore.E_NOTIMPL, "ResourceType: %q: of schema 1's modify requests the emulator serves Network only", req.ResourceType)
	}
	var add bool
	switch req.RequestType {
	case "Add":
		add = true
	case "Remove":
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "RequestType: %q is not valid for ResourceType Network (Add, Remove)", req.RequestType)
	}
	var epID string
	if err := json.Unmarshal(req.Settings, &epID); err != nil || epID == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings: %s: want the endpoint's id, a string", string(req.Settings))
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.state == schema2.StateStopped {
		return hresult.Errorf(computecore.HCS_E_INVALID_STATE, "modify compute system %q: it has stopped", s.id)
	}
	if s.doc.Container == nil {
		return hresult.Errorf(computecore.E_NOT_SUPPORTED, "ResourceType: Network: compute system %q is not a container", s.id)
	}
	if s.hosted != nil {
		// Its network is the VM's (vm_network_linux.go): endpoints reach it as NICs of the VM.
		return hresult.Errorf(computecore.E_NOT_SUPPORTED, "ResourceType: Network: compute system %q runs in utility VM %q, whose NICs are its network (VirtualMachine/Devices/NetworkAdapters)", s.id, s.doc.HostingSystemId)
	}
	if s.netnsID == "" {
		if err := e.firstEndpointLocked(ctx, s, epID, add); err != nil {
			return err
		}
	} else if err := e.net.SystemEndpoint(ctx, s.netnsID, s.id, epID, add); err != nil {
		// The lock order is system → hns (internal/hcsemu/hns objects.go).
		return err
	}
	if s.state != schema2.StateCreated {
		// The container's adapters changed: so does what its resolver reads (dns_linux.go); a
		// created one gets the file when it starts.
		if err := s.writeResolvConfLocked(); err != nil {
			log.G(ctx).WithError(err).WithField("system", s.id).Warn("hcsemu: could not rewrite the container's resolver file")
		}
	}
	log.G(ctx).WithFields(log.Fields{"system": s.id, "endpoint": epID, "request": req.RequestType}).Info("hcsemu: v1 network modify")
	return nil
}

// firstEndpointLocked serves a Network request for a container that runs in no HNS namespace.
// On Windows every container has a network compartment of its own, and a hot-added endpoint
// joins it. The emulator gives a container without a namespace none: its processes run in the
// daemon's own network namespace, which no endpoint may enter (nothing of HNS is added to the
// machine's network). So a container that has not started a process yet gets its compartment
// now, a namespace of the emulator's holding the endpoint, which its processes will start in
// and which goes with it (as for Container.Networking.NetworkAdapters); one whose processes
// already run in the daemon's namespace is refused rather than half done.
func (e *Engine) firstEndpointLocked(ctx context.Context, s *system, epID string, add bool) error {
	if !add {
		return hresult.Errorf(computecore.HRESULT(computenetwork.HCN_E_ENDPOINT_NOT_FOUND), "Settings: endpoint %s is not attached to compute system %q (it has no network namespace)", epID, s.id)
	}
	if s.everRan || len(s.procs) > 0 {
		return hresult.Errorf(computecore.E_NOTIMPL, "ResourceType: Network: compute system %q has no network namespace (Container.Networking.Namespace) "+
			"and its processes already run outside one; hot-adding endpoint %s to it is not emulated", s.id, epID)
	}
	id, path, err := e.net.SystemNamespace(ctx, s.id, []string{epID}, func(int) string { return "Settings" })
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		e.net.DeleteSystemNamespace(ctx, id)
		return hresult.Errorf(computecore.E_FAIL, "the network namespace of compute system %q: %v", s.id, err)
	}
	s.netnsID, s.netns, s.ownNetns = id, f, true
	log.G(ctx).WithFields(log.Fields{"system": s.id, "endpoint": epID, "namespace": id}).Info("hcsemu: v1 network modify: a namespace for the container")
	return nil
}
