package schema2

import (
	"encoding/json"
	"strings"
	"testing"
)

const goodCredSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"},{"Name":"webapp01","Scope":"CONTOSO"}]}}`

func TestParseCredentialSpec(t *testing.T) {
	c, err := ParseCredentialSpec("spec", goodCredSpec)
	if err != nil {
		t.Fatal(err)
	}
	if c.DomainJoinConfig.NetBiosName != "CONTOSO" || c.ActiveDirectoryConfig.GroupManagedServiceAccounts[1].Scope != "CONTOSO" {
		t.Errorf("decoded %+v", c)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`{"CmsPlugins"`, `[`, "spec: not a credential spec document"},
		{`["ActiveDirectory"]`, `[]`, "spec.CmsPlugins: missing"},
		{`["ActiveDirectory"]`, `["Kerberos"]`, `spec.CmsPlugins[0]="Kerberos"`},
		{`"DomainJoinConfig":{`, `"DomainJoinConfig":null,"x":{`, "spec.DomainJoinConfig: missing"},
		{`S-1-5-21-702590844`, `S-1-5-32-544`, `spec.DomainJoinConfig.Sid="S-1-5-32-544`},
		{`"MachineAccountName":"webapp01"`, `"MachineAccountName":""`, "spec.DomainJoinConfig.MachineAccountName: empty"},
		{`56d9b66c-d746`, `56d9b66c_d746`, `spec.DomainJoinConfig.Guid="56d9b66c_d746`},
		{`"DnsTreeName":"contoso.com"`, `"DnsTreeName":"contoso..com"`, `spec.DomainJoinConfig.DnsTreeName="contoso..com"`},
		{`"DnsName":"contoso.com"`, `"DnsName":"-contoso.com"`, `spec.DomainJoinConfig.DnsName="-contoso.com"`},
		{`"NetBiosName":"CONTOSO"`, `"NetBiosName":"CONTOSO-TOO-LONG-NAME"`, `spec.DomainJoinConfig.NetBiosName="CONTOSO-TOO-LONG-NAME"`},
		{`"ActiveDirectoryConfig":{`, `"ActiveDirectoryConfig":null,"y":{`, "spec.ActiveDirectoryConfig: missing"},
		{`"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"},{"Name":"webapp01","Scope":"CONTOSO"}]`, `"GroupManagedServiceAccounts":[]`, "spec.ActiveDirectoryConfig.GroupManagedServiceAccounts: missing"},
		{`{"Name":"webapp01","Scope":"CONTOSO"}`, `{"Name":"","Scope":"CONTOSO"}`, "GroupManagedServiceAccounts[1].Name: empty"},
		{`{"Name":"webapp01","Scope":"contoso.com"}`, `{"Name":"webapp01"}`, "GroupManagedServiceAccounts[0].Scope: empty"},
	} {
		doc := strings.Replace(goodCredSpec, tc.from, tc.to, 1)
		if doc == goodCredSpec {
			t.Fatalf("%q not in the spec", tc.from)
		}
		if _, err := ParseCredentialSpec("spec", doc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: err %v, want one naming %q", tc.from, tc.to, err, tc.want)
		}
	}
}

// TestCredentialGuardDocuments: the documents as HCS reads them (hcsshim's schema2 names).
func TestCredentialGuardDocuments(t *testing.T) {
	details, err := json.Marshal(ContainerCredentialGuardAddInstanceRequest{Id: "c1", CredentialSpec: `{"CmsPlugins":["ActiveDirectory"]}`, Transport: CCGTransportLRPC})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{ServiceModificationRequest{PropertyType: ServicePropertyTypeContainerCredentialGuard, Settings: ContainerCredentialGuardOperationRequest{Operation: CCGAddInstance, OperationDetails: details}},
			`{"PropertyType":"ContainerCredentialGuard","Settings":{"Operation":"AddInstance","OperationDetails":{"Id":"c1","CredentialSpec":"{\"CmsPlugins\":[\"ActiveDirectory\"]}","Transport":"LRPC"}}}`},
		{ServiceModificationRequest{PropertyType: ServicePropertyTypeContainerCredentialGuard, Settings: ContainerCredentialGuardOperationRequest{Operation: CCGRemoveInstance, OperationDetails: json.RawMessage(`{"Id":"c1"}`)}},
			`{"PropertyType":"ContainerCredentialGuard","Settings":{"Operation":"RemoveInstance","OperationDetails":{"Id":"c1"}}}`},
		{Container{ContainerCredentialGuard: &ContainerCredentialGuardState{Cookie: "k", RpcEndpoint: "ep", Transport: CCGTransportLRPC, CredentialSpec: "{}"}},
			`{"ContainerCredentialGuard":{"Cookie":"k","RpcEndpoint":"ep","Transport":"LRPC","CredentialSpec":"{}"}}`},
		{ContainerCredentialGuardSystemInfo{Instances: []ContainerCredentialGuardInstance{{Id: "c1", CredentialGuard: &ContainerCredentialGuardState{Cookie: "k"}}}},
			`{"Instances":[{"Id":"c1","CredentialGuard":{"Cookie":"k"}}]}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T = %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
}
