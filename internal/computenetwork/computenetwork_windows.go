package computenetwork

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// New returns the computenetwork.dll and vmcompute.dll bindings. It fails, rather than
// panicking later, when a DLL or one of its functions is missing (computenetwork.dll ships with
// Windows Server 2019 and later).
func New() (API, error) {
	for _, p := range []*windows.LazyProc{
		procHcnEnumerateNetworks, procHcnCreateNetwork, procHcnOpenNetwork, procHcnModifyNetwork,
		procHcnQueryNetworkProperties, procHcnDeleteNetwork, procHcnCloseNetwork,
		procHcnEnumerateEndpoints, procHcnCreateEndpoint, procHcnOpenEndpoint, procHcnModifyEndpoint,
		procHcnQueryEndpointProperties, procHcnDeleteEndpoint, procHcnCloseEndpoint,
		procHcnEnumerateNamespaces, procHcnCreateNamespace, procHcnOpenNamespace, procHcnModifyNamespace,
		procHcnQueryNamespaceProperties, procHcnDeleteNamespace, procHcnCloseNamespace,
		procHcnEnumerateLoadBalancers, procHcnCreateLoadBalancer, procHcnOpenLoadBalancer, procHcnModifyLoadBalancer,
		procHcnQueryLoadBalancerProperties, procHcnDeleteLoadBalancer, procHcnCloseLoadBalancer,
		procHNSCall,
	} {
		if err := p.Find(); err != nil {
			return nil, fmt.Errorf("%s has no %s (HCN needs Windows Server 2019 or later): %w", p.Name, p.Name, err)
		}
	}
	return dll{}, nil
}

// dll implements API on the DLLs. It keeps no state: HCN handles are the DLL's.
type dll struct{}

var _ API = dll{}

// utf16 converts a string argument; "" is passed as an empty string, not NULL, as hcsshim's
// bindings do (its mkwinsyscall string parameters).
func utf16(op, name, s string) (*uint16, error) {
	p, err := windows.UTF16PtrFromString(s)
	if err != nil {
		return nil, &Error{Op: op, HResult: E_INVALIDARG, Result: fmt.Sprintf("%s %q contains NUL", name, s)}
	}
	return p, nil
}

// take copies a string HCN allocated with CoTaskMemAlloc and frees it.
func take(p *uint16) string {
	if p == nil {
		return ""
	}
	s := windows.UTF16PtrToString(p)
	windows.CoTaskMemFree(unsafe.Pointer(p))
	return s
}

// check turns an HRESULT and its result record into nil or an *Error. A result record with a
// success HRESULT is not an error (hcsshim treats any record as one; HCN leaves it NULL then).
func check(op string, hr int32, result *uint16) error {
	doc := take(result)
	if hr >= 0 {
		return nil
	}
	return &Error{Op: op, HResult: HRESULT(uint32(hr)), Result: doc}
}

func (dll) EnumerateNetworks(query string) (string, error) {
	q, err := utf16("HcnEnumerateNetworks", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnEnumerateNetworks(q, &out, &result)
	s := take(out)
	return s, check("HcnEnumerateNetworks", hr, result)
}

func (dll) CreateNetwork(id GUID, settings string) (Network, error) {
	s, err := utf16("HcnCreateNetwork", "settings", settings)
	if err != nil {
		return 0, err
	}
	var h Network
	var result *uint16
	hr := hcnCreateNetwork(&id, s, &h, &result)
	return h, check("HcnCreateNetwork", hr, result)
}

func (dll) OpenNetwork(id GUID) (Network, error) {
	var h Network
	var result *uint16
	hr := hcnOpenNetwork(&id, &h, &result)
	return h, check("HcnOpenNetwork", hr, result)
}

func (dll) ModifyNetwork(n Network, settings string) error {
	s, err := utf16("HcnModifyNetwork", "settings", settings)
	if err != nil {
		return err
	}
	var result *uint16
	return check("HcnModifyNetwork", hcnModifyNetwork(n, s, &result), result)
}

func (dll) QueryNetworkProperties(n Network, query string) (string, error) {
	q, err := utf16("HcnQueryNetworkProperties", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnQueryNetworkProperties(n, q, &out, &result)
	s := take(out)
	return s, check("HcnQueryNetworkProperties", hr, result)
}

func (dll) DeleteNetwork(id GUID) error {
	var result *uint16
	return check("HcnDeleteNetwork", hcnDeleteNetwork(&id, &result), result)
}

func (dll) CloseNetwork(n Network) error {
	return check("HcnCloseNetwork", hcnCloseNetwork(n), nil)
}

func (dll) EnumerateEndpoints(query string) (string, error) {
	q, err := utf16("HcnEnumerateEndpoints", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnEnumerateEndpoints(q, &out, &result)
	s := take(out)
	return s, check("HcnEnumerateEndpoints", hr, result)
}

func (dll) CreateEndpoint(n Network, id GUID, settings string) (Endpoint, error) {
	s, err := utf16("HcnCreateEndpoint", "settings", settings)
	if err != nil {
		return 0, err
	}
	var h Endpoint
	var result *uint16
	hr := hcnCreateEndpoint(n, &id, s, &h, &result)
	return h, check("HcnCreateEndpoint", hr, result)
}

func (dll) OpenEndpoint(id GUID) (Endpoint, error) {
	var h Endpoint
	var result *uint16
	hr := hcnOpenEndpoint(&id, &h, &result)
	return h, check("HcnOpenEndpoint", hr, result)
}

func (dll) ModifyEndpoint(e Endpoint, settings string) error {
	s, err := utf16("HcnModifyEndpoint", "settings", settings)
	if err != nil {
		return err
	}
	var result *uint16
	return check("HcnModifyEndpoint", hcnModifyEndpoint(e, s, &result), result)
}

func (dll) QueryEndpointProperties(e Endpoint, query string) (string, error) {
	q, err := utf16("HcnQueryEndpointProperties", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnQueryEndpointProperties(e, q, &out, &result)
	s := take(out)
	return s, check("HcnQueryEndpointProperties", hr, result)
}

func (dll) DeleteEndpoint(id GUID) error {
	var result *uint16
	return check("HcnDeleteEndpoint", hcnDeleteEndpoint(&id, &result), result)
}

func (dll) CloseEndpoint(e Endpoint) error {
	return check("HcnCloseEndpoint", hcnCloseEndpoint(e), nil)
}

func (dll) EnumerateNamespaces(query string) (string, error) {
	q, err := utf16("HcnEnumerateNamespaces", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnEnumerateNamespaces(q, &out, &result)
	s := take(out)
	return s, check("HcnEnumerateNamespaces", hr, result)
}

func (dll) CreateNamespace(id GUID, settings string) (Namespace, error) {
	s, err := utf16("HcnCreateNamespace", "settings", settings)
	if err != nil {
		return 0, err
	}
	var h Namespace
	var result *uint16
	hr := hcnCreateNamespace(&id, s, &h, &result)
	return h, check("HcnCreateNamespace", hr, result)
}

func (dll) OpenNamespace(id GUID) (Namespace, error) {
	var h Namespace
	var result *uint16
	hr := hcnOpenNamespace(&id, &h, &result)
	return h, check("HcnOpenNamespace", hr, result)
}

func (dll) ModifyNamespace(ns Namespace, settings string) error {
	s, err := utf16("HcnModifyNamespace", "settings", settings)
	if err != nil {
		return err
	}
	var result *uint16
	return check("HcnModifyNamespace", hcnModifyNamespace(ns, s, &result), result)
}

func (dll) QueryNamespaceProperties(ns Namespace, query string) (string, error) {
	q, err := utf16("HcnQueryNamespaceProperties", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnQueryNamespaceProperties(ns, q, &out, &result)
	s := take(out)
	return s, check("HcnQueryNamespaceProperties", hr, result)
}

func (dll) DeleteNamespace(id GUID) error {
	var result *uint16
	return check("HcnDeleteNamespace", hcnDeleteNamespace(&id, &result), result)
}

func (dll) CloseNamespace(ns Namespace) error {
	return check("HcnCloseNamespace", hcnCloseNamespace(ns), nil)
}

func (dll) EnumerateLoadBalancers(query string) (string, error) {
	q, err := utf16("HcnEnumerateLoadBalancers", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnEnumerateLoadBalancers(q, &out, &result)
	s := take(out)
	return s, check("HcnEnumerateLoadBalancers", hr, result)
}

func (dll) CreateLoadBalancer(id GUID, settings string) (LoadBalancer, error) {
	s, err := utf16("HcnCreateLoadBalancer", "settings", settings)
	if err != nil {
		return 0, err
	}
	var h LoadBalancer
	var result *uint16
	hr := hcnCreateLoadBalancer(&id, s, &h, &result)
	return h, check("HcnCreateLoadBalancer", hr, result)
}

func (dll) OpenLoadBalancer(id GUID) (LoadBalancer, error) {
	var h LoadBalancer
	var result *uint16
	hr := hcnOpenLoadBalancer(&id, &h, &result)
	return h, check("HcnOpenLoadBalancer", hr, result)
}

func (dll) ModifyLoadBalancer(lb LoadBalancer, settings string) error {
	s, err := utf16("HcnModifyLoadBalancer", "settings", settings)
	if err != nil {
		return err
	}
	var result *uint16
	return check("HcnModifyLoadBalancer", hcnModifyLoadBalancer(lb, s, &result), result)
}

func (dll) QueryLoadBalancerProperties(lb LoadBalancer, query string) (string, error) {
	q, err := utf16("HcnQueryLoadBalancerProperties", "query", query)
	if err != nil {
		return "", err
	}
	var out, result *uint16
	hr := hcnQueryLoadBalancerProperties(lb, q, &out, &result)
	s := take(out)
	return s, check("HcnQueryLoadBalancerProperties", hr, result)
}

func (dll) DeleteLoadBalancer(id GUID) error {
	var result *uint16
	return check("HcnDeleteLoadBalancer", hcnDeleteLoadBalancer(&id, &result), result)
}

func (dll) CloseLoadBalancer(lb LoadBalancer) error {
	return check("HcnCloseLoadBalancer", hcnCloseLoadBalancer(lb), nil)
}

func (dll) HNSCall(method, path, request string) (string, error) {
	m, err := utf16("HNSCall", "method", method)
	if err != nil {
		return "", err
	}
	p, err := utf16("HNSCall", "path", path)
	if err != nil {
		return "", err
	}
	r, err := utf16("HNSCall", "request", request)
	if err != nil {
		return "", err
	}
	var out *uint16
	hr := hnsCall(m, p, r, &out)
	s := take(out)
	if hr < 0 {
		return s, &Error{Op: "HNSCall " + method + " " + path, HResult: HRESULT(uint32(hr)), Result: s}
	}
	return s, nil
}
