package wire

// The HNS half of the protocol: one method per computenetwork.dll function (named after it,
// with its "Hcn" prefix, so that they never collide with the HCS methods) and MethodHNSCall for
// vmcompute.dll's HNSCall. HCN calls are synchronous and take no operation; handles live on the
// client, which names objects on the wire by their GUID (canonical, lower case). A failed call
// has HResult set and Result = HCN's error record; a successful one has Result = the output
// document (enumeration: a JSON array of GUIDs; properties: the object; HNSCall: the response).
const (
	MethodHcnEnumerateNetworks           = "HcnEnumerateNetworks"
	MethodHcnCreateNetwork               = "HcnCreateNetwork"
	MethodHcnOpenNetwork                 = "HcnOpenNetwork"
	MethodHcnModifyNetwork               = "HcnModifyNetwork"
	MethodHcnQueryNetworkProperties      = "HcnQueryNetworkProperties"
	MethodHcnDeleteNetwork               = "HcnDeleteNetwork"
	MethodHcnEnumerateEndpoints          = "HcnEnumerateEndpoints"
	MethodHcnCreateEndpoint              = "HcnCreateEndpoint"
	MethodHcnOpenEndpoint                = "HcnOpenEndpoint"
	MethodHcnModifyEndpoint              = "HcnModifyEndpoint"
	MethodHcnQueryEndpointProperties     = "HcnQueryEndpointProperties"
	MethodHcnDeleteEndpoint              = "HcnDeleteEndpoint"
	MethodHcnEnumerateNamespaces         = "HcnEnumerateNamespaces"
	MethodHcnCreateNamespace             = "HcnCreateNamespace"
	MethodHcnOpenNamespace               = "HcnOpenNamespace"
	MethodHcnModifyNamespace             = "HcnModifyNamespace"
	MethodHcnQueryNamespaceProperties    = "HcnQueryNamespaceProperties"
	MethodHcnDeleteNamespace             = "HcnDeleteNamespace"
	MethodHcnEnumerateLoadBalancers      = "HcnEnumerateLoadBalancers"
	MethodHcnCreateLoadBalancer          = "HcnCreateLoadBalancer"
	MethodHcnOpenLoadBalancer            = "HcnOpenLoadBalancer"
	MethodHcnModifyLoadBalancer          = "HcnModifyLoadBalancer"
	MethodHcnQueryLoadBalancerProperties = "HcnQueryLoadBalancerProperties"
	MethodHcnDeleteLoadBalancer          = "HcnDeleteLoadBalancer"
	MethodHNSCall                        = "HNSCall"
)

// HcnEnumerateArgs are the args of the Enumerate methods: a HostComputeQuery document.
type HcnEnumerateArgs struct {
	Query string `json:"query,omitempty"`
}

// HcnCreateArgs are the args of the Create methods. ID is the GUID the caller passed ("" for
// the zero GUID: the settings' ID, else a new one); Network, for an endpoint, is the GUID of the
// network whose handle was passed.
type HcnCreateArgs struct {
	ID       string `json:"id,omitempty"`
	Network  string `json:"network,omitempty"`
	Settings string `json:"settings"`
}

// HcnObjectArgs are the args of the Open, Modify, Query and Delete methods: the object's GUID
// and the settings or query document.
type HcnObjectArgs struct {
	ID       string `json:"id"`
	Document string `json:"document,omitempty"`
}

// HcnObjectReply is the reply of the Create and Open methods: the GUID of the object the handle
// now refers to.
type HcnObjectReply struct {
	ID string `json:"id"`
}

// HNSCallArgs are the args of MethodHNSCall.
type HNSCallArgs struct {
	Method  string `json:"method"`
	Path    string `json:"path"`
	Request string `json:"request,omitempty"`
}
