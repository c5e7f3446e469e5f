package computenetwork

// The computenetwork.dll functions (computenetwork.h) and vmcompute.dll's HNSCall, declared for
// mkwinsyscall, which writes zsyscall_windows.go. The signatures are those hcsshim's hcn
// package binds. Every HRESULT is returned raw (hr int32), as in internal/computecore, so that
// FACILITY_WIN32 codes are not folded into a syscall.Errno; strings are *uint16 so that the
// caller decides when "" means NULL. result receives HCN's error record (CoTaskMemAlloc'd).

//sys	hcnEnumerateNetworks(query *uint16, networks **uint16, result **uint16) (hr int32) = computenetwork.HcnEnumerateNetworks
//sys	hcnCreateNetwork(id *GUID, settings *uint16, network *Network, result **uint16) (hr int32) = computenetwork.HcnCreateNetwork
//sys	hcnOpenNetwork(id *GUID, network *Network, result **uint16) (hr int32) = computenetwork.HcnOpenNetwork
//sys	hcnModifyNetwork(network Network, settings *uint16, result **uint16) (hr int32) = computenetwork.HcnModifyNetwork
//sys	hcnQueryNetworkProperties(network Network, query *uint16, properties **uint16, result **uint16) (hr int32) = computenetwork.HcnQueryNetworkProperties
//sys	hcnDeleteNetwork(id *GUID, result **uint16) (hr int32) = computenetwork.HcnDeleteNetwork
//sys	hcnCloseNetwork(network Network) (hr int32) = computenetwork.HcnCloseNetwork

//sys	hcnEnumerateEndpoints(query *uint16, endpoints **uint16, result **uint16) (hr int32) = computenetwork.HcnEnumerateEndpoints
//sys	hcnCreateEndpoint(network Network, id *GUID, settings *uint16, endpoint *Endpoint, result **uint16) (hr int32) = computenetwork.HcnCreateEndpoint
//sys	hcnOpenEndpoint(id *GUID, endpoint *Endpoint, result **uint16) (hr int32) = computenetwork.HcnOpenEndpoint
//sys	hcnModifyEndpoint(endpoint Endpoint, settings *uint16, result **uint16) (hr int32) = computenetwork.HcnModifyEndpoint
//sys	hcnQueryEndpointProperties(endpoint Endpoint, query *uint16, properties **uint16, result **uint16) (hr int32) = computenetwork.HcnQueryEndpointProperties
//sys	hcnDeleteEndpoint(id *GUID, result **uint16) (hr int32) = computenetwork.HcnDeleteEndpoint
//sys	hcnCloseEndpoint(endpoint Endpoint) (hr int32) = computenetwork.HcnCloseEndpoint

//sys	hcnEnumerateNamespaces(query *uint16, namespaces **uint16, result **uint16) (hr int32) = computenetwork.HcnEnumerateNamespaces
//sys	hcnCreateNamespace(id *GUID, settings *uint16, namespace *Namespace, result **uint16) (hr int32) = computenetwork.HcnCreateNamespace
//sys	hcnOpenNamespace(id *GUID, namespace *Namespace, result **uint16) (hr int32) = computenetwork.HcnOpenNamespace
//sys	hcnModifyNamespace(namespace Namespace, settings *uint16, result **uint16) (hr int32) = computenetwork.HcnModifyNamespace
//sys	hcnQueryNamespaceProperties(namespace Namespace, query *uint16, properties **uint16, result **uint16) (hr int32) = computenetwork.HcnQueryNamespaceProperties
//sys	hcnDeleteNamespace(id *GUID, result **uint16) (hr int32) = computenetwork.HcnDeleteNamespace
//sys	hcnCloseNamespace(namespace Namespace) (hr int32) = computenetwork.HcnCloseNamespace

//sys	hcnEnumerateLoadBalancers(query *uint16, loadBalancers **uint16, result **uint16) (hr int32) = computenetwork.HcnEnumerateLoadBalancers
//sys	hcnCreateLoadBalancer(id *GUID, settings *uint16, loadBalancer *LoadBalancer, result **uint16) (hr int32) = computenetwork.HcnCreateLoadBalancer
//sys	hcnOpenLoadBalancer(id *GUID, loadBalancer *LoadBalancer, result **uint16) (hr int32) = computenetwork.HcnOpenLoadBalancer
//sys	hcnModifyLoadBalancer(loadBalancer LoadBalancer, settings *uint16, result **uint16) (hr int32) = computenetwork.HcnModifyLoadBalancer
//sys	hcnQueryLoadBalancerProperties(loadBalancer LoadBalancer, query *uint16, properties **uint16, result **uint16) (hr int32) = computenetwork.HcnQueryLoadBalancerProperties
//sys	hcnDeleteLoadBalancer(id *GUID, result **uint16) (hr int32) = computenetwork.HcnDeleteLoadBalancer
//sys	hcnCloseLoadBalancer(loadBalancer LoadBalancer) (hr int32) = computenetwork.HcnCloseLoadBalancer

//sys	hnsCall(method *uint16, path *uint16, object *uint16, response **uint16) (hr int32) = vmcompute.HNSCall
