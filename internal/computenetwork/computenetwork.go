// Package computenetwork is the surface of the Host Compute Network service API that runhcs
// uses (computenetwork.dll, https://learn.microsoft.com/windows-server/networking/technologies/hcn/hcn-top),
// plus HNSCall, the HNS v1 entry point that vmcompute.dll exports, as one Go interface, API,
// whose methods map one to one to those functions.
//
// On Windows, New returns bindings to the DLLs generated with mkwinsyscall. Elsewhere the
// implementation is the hcsemu daemon's client (internal/hcsemu/client), which a caller one
// level up chooses; this package imports nothing of runhcs's, as internal/computecore does not.
//
// The API keeps HCN's shape: handles are opaque, ids are GUIDs, documents are JSON strings, and
// a failure is an *Error carrying the HRESULT and the result document HCN returned beside it.
// Typed, context-bounded wrappers live in internal/hns.
package computenetwork

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Handles are opaque values owned by the implementation: HCN_NETWORK, HCN_ENDPOINT,
// HCN_NAMESPACE and HCN_LOADBALANCER on Windows, table keys in the emulator client.
type (
	Network      uintptr
	Endpoint     uintptr
	Namespace    uintptr
	LoadBalancer uintptr
)

// GUID is a Windows GUID in its in-memory layout, which is what the HCN functions take.
type GUID struct {
	Data1 uint32
	Data2 uint16
	Data3 uint16
	Data4 [8]byte
}

// ParseGUID parses the canonical text form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, with or
// without braces, in any case.
func ParseGUID(s string) (GUID, error) {
	t := strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	if len(t) != 36 || t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
		return GUID{}, fmt.Errorf("%q is not a GUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", s)
	}
	b, err := hex.DecodeString(t[0:8] + t[9:13] + t[14:18] + t[19:23] + t[24:36])
	if err != nil {
		return GUID{}, fmt.Errorf("%q is not a GUID: %w", s, err)
	}
	var g GUID
	g.Data1 = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	g.Data2 = uint16(b[4])<<8 | uint16(b[5])
	g.Data3 = uint16(b[6])<<8 | uint16(b[7])
	copy(g.Data4[:], b[8:])
	return g, nil
}

// String is the canonical lower-case text form, as HCN writes ids in its documents.
func (g GUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", g.Data1, g.Data2, g.Data3, g.Data4[0:2], g.Data4[2:8])
}

// IsZero reports the all-zero GUID, which a create call passes to let the service choose the id
// (or take it from the settings document), as hcsshim's hcn package does.
func (g GUID) IsZero() bool { return g == GUID{} }

// API is computenetwork.dll and vmcompute.dll's HNSCall. Every method's name is the C function's
// without the "Hcn" prefix; out-parameters are results, the result document that HCN returns
// beside a failure is part of the *Error. A create with the zero GUID lets the service choose
// the id; the id the object got is in its properties.
type API interface {
	EnumerateNetworks(query string) (networks string, err error)
	CreateNetwork(id GUID, settings string) (Network, error)
	OpenNetwork(id GUID) (Network, error)
	ModifyNetwork(n Network, settings string) error
	QueryNetworkProperties(n Network, query string) (properties string, err error)
	DeleteNetwork(id GUID) error
	CloseNetwork(n Network) error

	EnumerateEndpoints(query string) (endpoints string, err error)
	CreateEndpoint(n Network, id GUID, settings string) (Endpoint, error)
	OpenEndpoint(id GUID) (Endpoint, error)
	ModifyEndpoint(e Endpoint, settings string) error
	QueryEndpointProperties(e Endpoint, query string) (properties string, err error)
	DeleteEndpoint(id GUID) error
	CloseEndpoint(e Endpoint) error

	EnumerateNamespaces(query string) (namespaces string, err error)
	CreateNamespace(id GUID, settings string) (Namespace, error)
	OpenNamespace(id GUID) (Namespace, error)
	ModifyNamespace(ns Namespace, settings string) error
	QueryNamespaceProperties(ns Namespace, query string) (properties string, err error)
	DeleteNamespace(id GUID) error
	CloseNamespace(ns Namespace) error

	EnumerateLoadBalancers(query string) (loadBalancers string, err error)
	CreateLoadBalancer(id GUID, settings string) (LoadBalancer, error)
	OpenLoadBalancer(id GUID) (LoadBalancer, error)
	ModifyLoadBalancer(lb LoadBalancer, settings string) error
	QueryLoadBalancerProperties(lb LoadBalancer, query string) (properties string, err error)
	DeleteLoadBalancer(id GUID) error
	CloseLoadBalancer(lb LoadBalancer) error

	// HNSCall is vmcompute.dll's HNSCall(method, path, object, &response): the HNS v1 REST-like
	// surface (GET /networks/, POST /endpoints/, GET /globals/version, …). The response is
	// the JSON {"Success":…,"Error":…,"Output":…}; a failing HRESULT is an *Error.
	HNSCall(method, path, request string) (response string, err error)
}

// Error is a failed call: the HRESULT and the result document (HCN's JSON error record, or "").
type Error struct {
	Op      string
	HResult HRESULT
	Result  string
}

func (e *Error) Error() string {
	if e.Result != "" {
		return fmt.Sprintf("%s: %v: %s", e.Op, e.HResult, e.Result)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.HResult)
}

// Unwrap makes errors.Is(err, HCN_E_…) work.
func (e *Error) Unwrap() error { return e.HResult }
