package schema2

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Container Credential Guard (CCG): how a container gets a group-managed service account. The
// client adds an instance for the container with HcsModifyServiceSettings, reads its state back
// with HcsGetServiceProperties and puts that state in the container document
// (Container.ContainerCredentialGuard); it removes the instance with HcsModifyServiceSettings when
// the container goes, HCS does not (hcsshim internal/credentials/credentials.go; Microsoft's
// HcsModifyServiceSettings reference names ContainerCredentialGuardOperationRequest as the
// Settings of PropertyType "ContainerCredentialGuard"). Names as hcsshim's schema2
// (container_credential_guard_*.go, HCS schema 2.4).

// ServicePropertyTypeContainerCredentialGuard is the PropertyType of the service settings and
// properties of CCG instances.
const ServicePropertyTypeContainerCredentialGuard PropertyType = "ContainerCredentialGuard"

// ServiceModificationRequest is the document of HcsModifyServiceSettings.
type ServiceModificationRequest struct {
	PropertyType PropertyType `json:"PropertyType,omitempty"`
	Settings     any          `json:"Settings,omitempty"`
}

// The operations of a ContainerCredentialGuardOperationRequest.
const (
	CCGAddInstance    = "AddInstance"
	CCGRemoveInstance = "RemoveInstance"
)

// The transports of a CCG instance: LRPC for process-isolated containers, HvSocket for those in a
// utility VM (hcsshim CreateCredentialGuard).
const (
	CCGTransportLRPC     = "LRPC"
	CCGTransportHvSocket = "HvSocket"
)

// ContainerCredentialGuardOperationRequest is the Settings of a "ContainerCredentialGuard"
// service modification.
type ContainerCredentialGuardOperationRequest struct {
	Operation        string          `json:"Operation,omitempty"`
	OperationDetails json.RawMessage `json:"OperationDetails,omitempty"`
}

// ContainerCredentialGuardAddInstanceRequest is the OperationDetails of AddInstance. CredentialSpec
// is the credential spec document as a JSON string.
type ContainerCredentialGuardAddInstanceRequest struct {
	Id             string `json:"Id,omitempty"`
	CredentialSpec string `json:"CredentialSpec,omitempty"`
	Transport      string `json:"Transport,omitempty"`
}

// ContainerCredentialGuardRemoveInstanceRequest is the OperationDetails of RemoveInstance.
type ContainerCredentialGuardRemoveInstanceRequest struct {
	Id string `json:"Id,omitempty"`
}

// ContainerCredentialGuardState is a running instance's state, which the container document
// carries as Container.ContainerCredentialGuard.
type ContainerCredentialGuardState struct {
	Cookie         string `json:"Cookie,omitempty"`
	RpcEndpoint    string `json:"RpcEndpoint,omitempty"`
	Transport      string `json:"Transport,omitempty"`
	CredentialSpec string `json:"CredentialSpec,omitempty"`
}

// ContainerCredentialGuardInstance is one instance in ContainerCredentialGuardSystemInfo.
// HvSocketConfig is set for an instance of transport HvSocket: the service a container in a
// utility VM reaches the instance through, which the client adds to that VM's HvSocket service
// table (hcsshim hcsoci/resources_wcow.go: "By default HVSocket won't allow something inside the
// VM to connect back to a process on the host").
type ContainerCredentialGuardInstance struct {
	Id              string                                         `json:"Id,omitempty"`
	CredentialGuard *ContainerCredentialGuardState                 `json:"CredentialGuard,omitempty"`
	HvSocketConfig  *ContainerCredentialGuardHvSocketServiceConfig `json:"HvSocketConfig,omitempty"`
}

// ContainerCredentialGuardHvSocketServiceConfig is the HvSocket service of an instance: its
// service GUID (the key of its entry in the VM's ServiceTable) and the entry.
type ContainerCredentialGuardHvSocketServiceConfig struct {
	ServiceId     string                 `json:"ServiceId,omitempty"`
	ServiceConfig *HvSocketServiceConfig `json:"ServiceConfig,omitempty"`
}

// ContainerCredentialGuardSystemInfo is the service property "ContainerCredentialGuard": every
// instance.
type ContainerCredentialGuardSystemInfo struct {
	Instances []ContainerCredentialGuardInstance `json:"Instances,omitempty"`
}

// CredentialSpec is a gMSA credential spec document, as Microsoft's CredentialSpec PowerShell
// module writes it (learn.microsoft.com/virtualization/windowscontainers/manage-containers/
// manage-serviceaccounts, "Create a credential spec").
type CredentialSpec struct {
	CmsPlugins            []string               `json:"CmsPlugins"`
	DomainJoinConfig      *DomainJoinConfig      `json:"DomainJoinConfig"`
	ActiveDirectoryConfig *ActiveDirectoryConfig `json:"ActiveDirectoryConfig"`
}

// DomainJoinConfig is the domain the container is joined to.
type DomainJoinConfig struct {
	Sid                string `json:"Sid"`
	MachineAccountName string `json:"MachineAccountName"`
	Guid               string `json:"Guid"`
	DnsTreeName        string `json:"DnsTreeName"`
	DnsName            string `json:"DnsName"`
	NetBiosName        string `json:"NetBiosName"`
}

// ActiveDirectoryConfig names the gMSAs the container may use. HostAccountConfig (a host that is
// not domain joined, with a CCG plugin) is kept as it is.
type ActiveDirectoryConfig struct {
	GroupManagedServiceAccounts []GroupManagedServiceAccount `json:"GroupManagedServiceAccounts"`
	HostAccountConfig           json.RawMessage              `json:"HostAccountConfig,omitempty"`
}

// GroupManagedServiceAccount is one gMSA: its account name and the domain (DNS or NetBIOS name)
// it is in.
type GroupManagedServiceAccount struct {
	Name  string `json:"Name"`
	Scope string `json:"Scope"`
}

var (
	domainSID = regexp.MustCompile(`^S-1-5-21(-[0-9]+){1,15}$`)
	guidForm  = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// ParseCredentialSpec decodes and checks a credential spec. Errors name the field (as a path
// under field, e.g. "windows.credentialSpec.DomainJoinConfig.Sid") and its value.
func ParseCredentialSpec(field, doc string) (*CredentialSpec, error) {
	var c CredentialSpec
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("%s: not a credential spec document: %v", field, err)
	}
	if len(c.CmsPlugins) == 0 {
		return nil, fmt.Errorf("%s.CmsPlugins: missing or empty (want [\"ActiveDirectory\"])", field)
	}
	for i, p := range c.CmsPlugins {
		if p != "ActiveDirectory" {
			return nil, fmt.Errorf("%s.CmsPlugins[%d]=%q: unknown plugin (want \"ActiveDirectory\")", field, i, p)
		}
	}
	d := c.DomainJoinConfig
	if d == nil {
		return nil, fmt.Errorf("%s.DomainJoinConfig: missing", field)
	}
	f := field + ".DomainJoinConfig."
	switch {
	case !domainSID.MatchString(d.Sid):
		return nil, fmt.Errorf("%sSid=%q: not a domain SID (S-1-5-21-…)", f, d.Sid)
	case d.MachineAccountName == "":
		return nil, fmt.Errorf("%sMachineAccountName: empty", f)
	case !guidForm.MatchString(d.Guid):
		return nil, fmt.Errorf("%sGuid=%q: not a GUID", f, d.Guid)
	case !dnsName(d.DnsTreeName):
		return nil, fmt.Errorf("%sDnsTreeName=%q: not a DNS name", f, d.DnsTreeName)
	case !dnsName(d.DnsName):
		return nil, fmt.Errorf("%sDnsName=%q: not a DNS name", f, d.DnsName)
	case d.NetBiosName == "" || len(d.NetBiosName) > 15 || strings.ContainsAny(d.NetBiosName, `\/:*?"<>|. `):
		// NetBIOS domain names are at most 15 characters, without these (Microsoft's "Naming
		// conventions in Active Directory").
		return nil, fmt.Errorf("%sNetBiosName=%q: not a NetBIOS domain name (1-15 characters, none of \\/:*?\"<>|. )", f, d.NetBiosName)
	}
	a := c.ActiveDirectoryConfig
	if a == nil {
		return nil, fmt.Errorf("%s.ActiveDirectoryConfig: missing", field)
	}
	if len(a.GroupManagedServiceAccounts) == 0 {
		return nil, fmt.Errorf("%s.ActiveDirectoryConfig.GroupManagedServiceAccounts: missing or empty", field)
	}
	for i, g := range a.GroupManagedServiceAccounts {
		f := fmt.Sprintf("%s.ActiveDirectoryConfig.GroupManagedServiceAccounts[%d]", field, i)
		if g.Name == "" {
			return nil, fmt.Errorf("%s.Name: empty", f)
		}
		if g.Scope == "" {
			return nil, fmt.Errorf("%s.Scope: empty", f)
		}
	}
	return &c, nil
}

// IsGUID reports whether s has a GUID's form (8-4-4-4-12 hex digits, no braces), as HvSocket
// service ids and domain GUIDs are written.
func IsGUID(s string) bool { return guidForm.MatchString(s) }

// dnsName reports whether s is a DNS name: dot-separated labels of letters, digits and hyphens.
func dnsName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
