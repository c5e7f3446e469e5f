package hcn

import (
	"encoding/json"
	"net"
)

// Response is what HNSCall returns: Output holds the object(s) on success.
type Response struct {
	Success bool            `json:"Success"`
	Error   string          `json:"Error,omitempty"`
	Output  json.RawMessage `json:"Output,omitempty"`
}

// V1Subnet is a subnet of a v1 network.
type V1Subnet struct {
	AddressPrefix  string            `json:",omitempty"`
	GatewayAddress string            `json:",omitempty"`
	Policies       []json.RawMessage `json:",omitempty"`
}

// V1MacPool is a MAC pool of a v1 network.
type V1MacPool struct {
	StartMacAddress string `json:",omitempty"`
	EndMacAddress   string `json:",omitempty"`
}

// HNSNetwork is a v1 network (hcsshim's hns.HNSNetwork).
type HNSNetwork struct {
	Id                   string            `json:"ID,omitempty"`
	Name                 string            `json:",omitempty"`
	Type                 string            `json:",omitempty"`
	NetworkAdapterName   string            `json:",omitempty"`
	SourceMac            string            `json:",omitempty"`
	Policies             []json.RawMessage `json:",omitempty"`
	MacPools             []V1MacPool       `json:",omitempty"`
	Subnets              []V1Subnet        `json:",omitempty"`
	DNSSuffix            string            `json:",omitempty"`
	DNSServerList        string            `json:",omitempty"`
	DNSServerCompartment uint32            `json:",omitempty"`
	ManagementIP         string            `json:",omitempty"`
	AutomaticDNS         bool              `json:",omitempty"`
}

// V1Namespace is the Namespace of a v1 endpoint and the object of /namespaces/.
type V1Namespace struct {
	ID            string                `json:"ID"`
	IsDefault     bool                  `json:",omitempty"`
	ResourceList  []V1NamespaceResource `json:",omitempty"`
	CompartmentId uint32                `json:",omitempty"`
}

// V1NamespaceResource is a resource of a v1 namespace.
type V1NamespaceResource struct {
	Type string          `json:"Type"`
	Data json.RawMessage `json:"Data"`
}

// HNSEndpoint is a v1 endpoint (hcsshim's hns.HNSEndpoint).
type HNSEndpoint struct {
	Id                 string            `json:"ID,omitempty"`
	Name               string            `json:",omitempty"`
	VirtualNetwork     string            `json:",omitempty"`
	VirtualNetworkName string            `json:",omitempty"`
	Policies           []json.RawMessage `json:",omitempty"`
	MacAddress         string            `json:",omitempty"`
	IPAddress          net.IP            `json:",omitempty"`
	IPv6Address        net.IP            `json:",omitempty"`
	DNSSuffix          string            `json:",omitempty"`
	DNSServerList      string            `json:",omitempty"`
	DNSDomain          string            `json:",omitempty"`
	GatewayAddress     string            `json:",omitempty"`
	GatewayAddressV6   string            `json:",omitempty"`
	EnableInternalDNS  bool              `json:",omitempty"`
	DisableICC         bool              `json:",omitempty"`
	PrefixLength       uint8             `json:",omitempty"`
	IPv6PrefixLength   uint8             `json:",omitempty"`
	IsRemoteEndpoint   bool              `json:",omitempty"`
	EnableLowMetric    bool              `json:",omitempty"`
	Namespace          *V1Namespace      `json:",omitempty"`
	EncapOverhead      uint16            `json:",omitempty"`
	SharedContainers   []string          `json:",omitempty"`
	State              uint16            `json:",omitempty"`
}

// EndpointStats is what GET /endpointstats/<endpoint id> answers: an endpoint's traffic
// counters (hcsshim's hns.EndpointStats, which containerd's CRI reads for a Windows pod's
// network stats: BytesReceived as the pod's rx, BytesSent as its tx).
type EndpointStats struct {
	BytesReceived          uint64 `json:"BytesReceived"`
	BytesSent              uint64 `json:"BytesSent"`
	DroppedPacketsIncoming uint64 `json:"DroppedPacketsIncoming"`
	DroppedPacketsOutgoing uint64 `json:"DroppedPacketsOutgoing"`
	EndpointID             string `json:"EndpointId"`
	InstanceID             string `json:"InstanceId"`
	PacketsReceived        uint64 `json:"PacketsReceived"`
	PacketsSent            uint64 `json:"PacketsSent"`
}

// V1Policy is the common head of a v1 policy: its Type ("NAT", "OutBoundNAT", "ROUTE", …).
type V1Policy struct {
	Type string `json:"Type"`
}

// V1NatPolicy is a v1 port mapping ("NAT" policy); Protocol is "TCP" or "UDP".
type V1NatPolicy struct {
	Type                 string `json:"Type"`
	Protocol             string `json:",omitempty"`
	InternalPort         uint16 `json:",omitempty"`
	ExternalPort         uint16 `json:",omitempty"`
	ExternalPortReserved bool   `json:",omitempty"`
}

// V1NamespaceResourceRequest is what /namespaces/<id>/addresource and removeresource take.
type V1NamespaceResourceRequest struct {
	Type string          `json:"Type"`
	Data json.RawMessage `json:"Data"`
}

// V1NamespaceEndpointData is the Data of an Endpoint namespace resource in v1 ({"Id": …}).
type V1NamespaceEndpointData struct {
	ID string `json:"Id"`
}

// PolicyList is a v1 policy list, what GET /policylists/ answers (hnslib's and hcsshim's
// hns.PolicyList): the v1 view of a load balancer, its endpoints as references
// ("/endpoints/<id>") and an ELB policy.
type PolicyList struct {
	ID                 string            `json:"ID,omitempty"`
	EndpointReferences []string          `json:"References,omitempty"`
	Policies           []json.RawMessage `json:"Policies,omitempty"`
}

// V1ELBPolicy is a v1 load-balancer policy (Type "ELB"; hns.ELBPolicy).
type V1ELBPolicy struct {
	Type         string   `json:"Type"`
	Protocol     uint16   `json:"Protocol,omitempty"`
	InternalPort uint16   `json:"InternalPort"`
	ExternalPort uint16   `json:"ExternalPort"`
	SourceVIP    string   `json:"SourceVIP,omitempty"`
	VIPs         []string `json:"VIPs,omitempty"`
	ILB          bool     `json:"ILB,omitempty"`
	DSR          bool     `json:"IsDSR,omitempty"`
}
