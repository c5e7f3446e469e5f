package hcn

import "encoding/json"

// Version is SchemaVersion, and the HNS service version (/globals/version).
type Version struct {
	Major int `json:"Major"`
	Minor int `json:"Minor"`
}

// V2 is the schema version of the v2 documents.
var V2 = Version{Major: 2, Minor: 0}

// QueryFlags are HostComputeQuery.Flags.
type QueryFlags uint32

// QueryFlagsDetailed asks for all properties.
const QueryFlagsDetailed QueryFlags = 1

// HostComputeQuery filters an enumeration and shapes a properties query. Filter is a JSON
// object of field → value that an object must match (hcsshim filters on "ID", "Name" and, for
// endpoints, "VirtualNetwork").
type HostComputeQuery struct {
	SchemaVersion Version    `json:""`
	Flags         QueryFlags `json:",omitempty"`
	Filter        string     `json:",omitempty"`
}

// Network types. The emulator builds NAT and L2Bridge networks; HNS knows the others.
const (
	NAT         = "NAT"
	Transparent = "Transparent"
	L2Bridge    = "L2Bridge"
	L2Tunnel    = "L2Tunnel"
	ICS         = "ICS"
	Private     = "Private"
	Overlay     = "Overlay"
)

// Route is a route of a subnet or an endpoint.
type Route struct {
	NextHop           string `json:",omitempty"`
	DestinationPrefix string `json:",omitempty"`
	Metric            uint16 `json:",omitempty"`
}

// Subnet is one address space of an Ipam.
type Subnet struct {
	IpAddressPrefix string            `json:",omitempty"`
	Policies        []json.RawMessage `json:",omitempty"`
	Routes          []Route           `json:",omitempty"`
	Flags           uint32            `json:",omitempty"`
}

// Ipam is a network's address management: Type "Static" or "DHCP", and its subnets.
type Ipam struct {
	Type    string   `json:",omitempty"`
	Subnets []Subnet `json:",omitempty"`
}

// MacRange is a range of a MacPool.
type MacRange struct {
	StartMacAddress string `json:",omitempty"`
	EndMacAddress   string `json:",omitempty"`
}

// MacPool is the MAC addresses a network hands out.
type MacPool struct {
	Ranges []MacRange `json:",omitempty"`
}

// Dns is the DNS settings of a network or endpoint.
type Dns struct {
	Domain     string   `json:",omitempty"`
	Search     []string `json:",omitempty"`
	ServerList []string `json:",omitempty"`
	Options    []string `json:",omitempty"`
}

// ExtraParams is Health.Extra.
type ExtraParams struct {
	Resources        json.RawMessage `json:",omitempty"`
	SharedContainers json.RawMessage `json:",omitempty"`
	LayeredOn        string          `json:",omitempty"`
	SwitchGuid       string          `json:",omitempty"`
	UtilityVM        string          `json:",omitempty"`
	VirtualMachine   string          `json:",omitempty"`
}

// Health is an object's Health.
type Health struct {
	Data  any         `json:",omitempty"`
	Extra ExtraParams `json:",omitempty"`
}

// NetworkPolicy is a policy of a network (Type and free-form Settings).
type NetworkPolicy struct {
	Type     string          `json:""`
	Settings json.RawMessage `json:",omitempty"`
}

// HostComputeNetwork is a network.
type HostComputeNetwork struct {
	Id            string          `json:"ID,omitempty"`
	Name          string          `json:",omitempty"`
	Type          string          `json:",omitempty"`
	Policies      []NetworkPolicy `json:",omitempty"`
	MacPool       MacPool         `json:",omitempty"`
	Dns           Dns             `json:",omitempty"`
	Ipams         []Ipam          `json:",omitempty"`
	Flags         uint32          `json:",omitempty"`
	Health        Health          `json:",omitempty"`
	SchemaVersion Version         `json:",omitempty"`
}

// Endpoint policy types the emulator acts on or accepts.
const (
	PortMapping                = "PortMapping"
	OutBoundNAT                = "OutBoundNAT"
	ACL                        = "ACL"
	QOS                        = "QOS"
	L2Driver                   = "L2Driver"
	SDNRoute                   = "SDNRoute"
	L4Proxy                    = "L4Proxy"
	L4WFPPROXY                 = "L4WFPPROXY"
	PortName                   = "PortName"
	EncapOverhead              = "EncapOverhead"
	IOV                        = "Iov"
	NetworkProviderAddress     = "ProviderAddress"
	NetworkInterfaceConstraint = "InterfaceConstraint"
	TierAcl                    = "TierAcl"
)

// EndpointPolicy is a policy of an endpoint.
type EndpointPolicy struct {
	Type     string          `json:""`
	Settings json.RawMessage `json:",omitempty"`
}

// PortMappingPolicySetting is a PortMapping policy's settings: Protocol is an IP protocol
// number (6 TCP, 17 UDP); ExternalPort on the host maps to InternalPort on the endpoint.
type PortMappingPolicySetting struct {
	Protocol     uint32 `json:",omitempty"`
	InternalPort uint16 `json:",omitempty"`
	ExternalPort uint16 `json:",omitempty"`
	VIP          string `json:",omitempty"`
	Flags        uint32 `json:",omitempty"`
}

// OutboundNatPolicySetting is an OutBoundNAT policy's settings.
type OutboundNatPolicySetting struct {
	VirtualIP        string   `json:",omitempty"`
	Exceptions       []string `json:",omitempty"`
	Destinations     []string `json:",omitempty"`
	Flags            uint32   `json:",omitempty"`
	MaxPortPoolUsage uint16   `json:",omitempty"`
}

// IpConfig is an address of an endpoint.
type IpConfig struct {
	IpAddress    string `json:",omitempty"`
	PrefixLength uint8  `json:",omitempty"`
}

// HostComputeEndpoint is an endpoint. HostComputeNamespace is read-only: the namespace the
// endpoint was added to.
type HostComputeEndpoint struct {
	Id                   string           `json:"ID,omitempty"`
	Name                 string           `json:",omitempty"`
	HostComputeNetwork   string           `json:",omitempty"`
	HostComputeNamespace string           `json:",omitempty"`
	Policies             []EndpointPolicy `json:",omitempty"`
	IpConfigurations     []IpConfig       `json:",omitempty"`
	Dns                  Dns              `json:",omitempty"`
	Routes               []Route          `json:",omitempty"`
	MacAddress           string           `json:",omitempty"`
	Flags                uint32           `json:",omitempty"`
	Health               Health           `json:",omitempty"`
	SchemaVersion        Version          `json:",omitempty"`
}

// Namespace resource types and namespace types.
const (
	ResourceContainer = "Container"
	ResourceEndpoint  = "Endpoint"

	NamespaceHost         = "Host"
	NamespaceHostDefault  = "HostDefault"
	NamespaceGuest        = "Guest"
	NamespaceGuestDefault = "GuestDefault"
)

// NamespaceResource is a container or an endpoint in a namespace; Data is
// {"ID": "<id>"}.
type NamespaceResource struct {
	Type string          `json:""`
	Data json.RawMessage `json:""`
}

// NamespaceResourceData is a NamespaceResource's Data.
type NamespaceResourceData struct {
	Id string `json:"ID"`
}

// HostComputeNamespace is a namespace (a network compartment).
type HostComputeNamespace struct {
	Id            string              `json:"ID,omitempty"`
	NamespaceId   uint32              `json:",omitempty"`
	Type          string              `json:",omitempty"`
	Resources     []NamespaceResource `json:",omitempty"`
	SchemaVersion Version             `json:",omitempty"`
}

// Request types of the modify requests.
const (
	RequestAdd     = "Add"
	RequestRemove  = "Remove"
	RequestUpdate  = "Update"
	RequestRefresh = "Refresh"
)

// ModifyNetworkSettingRequest modifies a network (ResourceType "Policy", "DNS", "Extension").
type ModifyNetworkSettingRequest struct {
	ResourceType string          `json:",omitempty"`
	RequestType  string          `json:",omitempty"`
	Settings     json.RawMessage `json:",omitempty"`
}

// ModifyEndpointSettingRequest modifies an endpoint (ResourceType "Policy" or "Port").
type ModifyEndpointSettingRequest struct {
	ResourceType string          `json:",omitempty"`
	RequestType  string          `json:",omitempty"`
	Settings     json.RawMessage `json:",omitempty"`
}

// PolicyEndpointRequest is the Settings of an endpoint's Policy modify request.
type PolicyEndpointRequest struct {
	Policies []EndpointPolicy `json:",omitempty"`
}

// ModifyNamespaceSettingRequest adds or removes an endpoint or container of a namespace.
type ModifyNamespaceSettingRequest struct {
	ResourceType string          `json:",omitempty"`
	RequestType  string          `json:",omitempty"`
	Settings     json.RawMessage `json:",omitempty"`
}

// NamespaceEndpointRequest is the Settings of an Endpoint modify request of a namespace, as
// hcsshim's AddNamespaceEndpoint sends it.
type NamespaceEndpointRequest struct {
	EndpointId string `json:"EndpointId"`
}

// Endpoint flags (HostComputeEndpoint.Flags, hcsshim's and hnslib's hcn.EndpointFlags).
const (
	// EndpointFlagsRemoteEndpoint marks an endpoint that stands for an address on another host
	// (kube-proxy's backends on other nodes): it is never added to a namespace.
	EndpointFlagsRemoteEndpoint uint32 = 1
)

// ProviderAddressEndpointPolicySetting is a ProviderAddress endpoint policy's settings: the
// address of the host a remote endpoint lives on.
type ProviderAddressEndpointPolicySetting struct {
	ProviderAddress string `json:",omitempty"`
}

// Load balancer flags (HostComputeLoadBalancer.Flags, hcsshim's and hnslib's
// hcn.LoadBalancerFlags).
const (
	LoadBalancerFlagsDSR  uint32 = 1
	LoadBalancerFlagsIPv6 uint32 = 2
)

// Load balancer port mapping flags (LoadBalancerPortMapping.Flags, hcn's
// LoadBalancerPortMappingFlags; VipExternalIP 16 is kube-proxy's own constant, winkernel/hns.go).
const (
	LoadBalancerPortMappingFlagsILB            uint32 = 1
	LoadBalancerPortMappingFlagsLocalRoutedVIP uint32 = 2
	LoadBalancerPortMappingFlagsUseMux         uint32 = 4
	LoadBalancerPortMappingFlagsPreserveDIP    uint32 = 8
	LoadBalancerPortMappingFlagsVipExternalIP  uint32 = 16
)

// Load balancer distribution types (LoadBalancerPortMapping.DistributionType, hcn's
// LoadBalancerDistribution): per connection, per client IP and protocol, per client IP.
const (
	LoadBalancerDistributionNone             uint32 = 0
	LoadBalancerDistributionSourceIPProtocol uint32 = 1
	LoadBalancerDistributionSourceIP         uint32 = 2
)

// LoadBalancerPortMapping is one frontend port of a load balancer: Protocol is an IP protocol
// number (6 TCP, 17 UDP); ExternalPort on the frontend goes to InternalPort on the backends.
type LoadBalancerPortMapping struct {
	Protocol         uint32 `json:",omitempty"`
	InternalPort     uint16 `json:",omitempty"`
	ExternalPort     uint16 `json:",omitempty"`
	DistributionType uint32 `json:",omitempty"`
	Flags            uint32 `json:",omitempty"`
}

// HostComputeLoadBalancer is a load balancer (kube-proxy's Services): traffic to FrontendVIPs
// (or, without one, to the host's addresses) at a port mapping's ExternalPort goes to one of
// HostComputeEndpoints at its InternalPort.
type HostComputeLoadBalancer struct {
	Id                   string                    `json:"ID,omitempty"`
	HostComputeEndpoints []string                  `json:",omitempty"`
	SourceVIP            string                    `json:",omitempty"`
	FrontendVIPs         []string                  `json:",omitempty"`
	PortMappings         []LoadBalancerPortMapping `json:",omitempty"`
	SchemaVersion        Version                   `json:",omitempty"`
	Flags                uint32                    `json:",omitempty"`
}
