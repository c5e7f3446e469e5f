package hcsemu

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

const testCredSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"}]}}`

func ccgRequest(t *testing.T, op string, details any) string {
	t.Helper()
	d, err := json.Marshal(details)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(schema2.ServiceModificationRequest{
		PropertyType: schema2.ServicePropertyTypeContainerCredentialGuard,
		Settings:     schema2.ContainerCredentialGuardOperationRequest{Operation: op, OperationDetails: d},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ccgInstances(t *testing.T, api computecore.API) []schema2.ContainerCredentialGuardInstance {
	t.Helper()
	doc, err := api.GetServiceProperties(`{"PropertyTypes":["ContainerCredentialGuard"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var sp schema2.ServiceProperties
	var info schema2.ContainerCredentialGuardSystemInfo
	if err := json.Unmarshal([]byte(doc), &sp); err != nil || len(sp.Properties) != 1 {
		t.Fatalf("service properties %s: %v", doc, err)
	}
	if err := json.Unmarshal(sp.Properties[0], &info); err != nil {
		t.Fatal(err)
	}
	return info.Instances
}

// TestDaemonCredentialGuard adds, lists and removes Container Credential Guard instances through
// HcsModifyServiceSettings, refuses a container naming none, and shows a gMSA container's
// processes their domain.
func TestDaemonCredentialGuard(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	add := schema2.ContainerCredentialGuardAddInstanceRequest{Id: "gmsa-1", CredentialSpec: testCredSpec, Transport: schema2.CCGTransportLRPC}
	if _, err := api.ModifyServiceSettings(ccgRequest(t, schema2.CCGAddInstance, add)); err != nil {
		t.Fatal(err)
	}
	in := ccgInstances(t, api)
	if len(in) != 1 || in[0].Id != "gmsa-1" || in[0].CredentialGuard == nil || in[0].CredentialGuard.Cookie == "" ||
		in[0].CredentialGuard.RpcEndpoint == "" || in[0].CredentialGuard.Transport != "LRPC" || in[0].CredentialGuard.CredentialSpec != testCredSpec {
		t.Fatalf("instances %+v", in)
	}

	for _, tc := range []struct {
		name, doc string
		hr        computecore.HRESULT
		want      string
	}{
		{"duplicate", ccgRequest(t, schema2.CCGAddInstance, add), errAlreadyExists, `Id=\"gmsa-1\"`},
		{"bad transport", ccgRequest(t, schema2.CCGAddInstance, schema2.ContainerCredentialGuardAddInstanceRequest{Id: "x", CredentialSpec: testCredSpec, Transport: "TCP"}), computecore.E_INVALIDARG, `Transport=\"TCP\"`},
		{"bad spec", ccgRequest(t, schema2.CCGAddInstance, schema2.ContainerCredentialGuardAddInstanceRequest{Id: "x", CredentialSpec: strings.Replace(testCredSpec, `"Guid":"56d9b66c`, `"Guid":"zz`, 1), Transport: "LRPC"}), computecore.E_INVALIDARG, "DomainJoinConfig.Guid"},
		{"remove unknown", ccgRequest(t, schema2.CCGRemoveInstance, schema2.ContainerCredentialGuardRemoveInstanceRequest{Id: "nope"}), computecore.E_ELEMENT_NOT_FOUND, `Id=\"nope\"`},
		{"bad operation", ccgRequest(t, "Rename", struct{}{}), computecore.E_INVALIDARG, `Operation=\"Rename\"`},
		{"unknown field", `{"PropertyType":"ContainerCredentialGuard","Settings":{"Operation":"AddInstance","Bogus":1}}`, computecore.HCS_E_INVALID_JSON, "Bogus"},
		{"other setting", `{"PropertyType":"Memory","Settings":{}}`, computecore.E_NOTIMPL, "Memory"},
	} {
		// The message is in the ResultError document HCS returns beside the HRESULT.
		res, err := api.ModifyServiceSettings(tc.doc)
		if !errors.Is(err, tc.hr) || !strings.Contains(res, tc.want) {
			t.Errorf("%s: %v (%s), want %v naming %s", tc.name, err, res, tc.hr, tc.want)
		}
	}

	// A container naming the instance sees its domain; one naming another is refused.
	st, _ := json.Marshal(in[0].CredentialGuard)
	cs, _ := createSystem(t, api, "gmsa", `,"ContainerCredentialGuard":`+string(st), true)
	s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " env USERDOMAIN USERDNSDOMAIN HCSEMU_NETWORK_IDENTITY", CreateStdOutPipe: true})
	if got, want := readAll(t, s.stdout), "USERDOMAIN=User Manager\nUSERDNSDOMAIN=CONTOSO.COM\nHCSEMU_NETWORK_IDENTITY=CONTOSO\\webapp01$\n"; got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
	s.exitCode(t)

	op, err := api.CreateOperation(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	forged := strings.Replace(string(st), in[0].CredentialGuard.Cookie, "0000", 1)
	if sys, err := api.CreateComputeSystem("gmsa-forged", containerConfig(newVolume(t), `,"ContainerCredentialGuard":`+forged), op, 0); err == nil {
		res, err := api.WaitForOperationResult(op, opTimeout)
		api.CloseComputeSystem(sys)
		if !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(res, "ContainerCredentialGuard") {
			t.Errorf("container naming no instance: %v (%s), want E_INVALIDARG naming ContainerCredentialGuard", err, res)
		}
	} else if !errors.Is(err, computecore.E_INVALIDARG) {
		t.Errorf("container naming no instance: %v", err)
	}

	if _, err := api.ModifyServiceSettings(ccgRequest(t, schema2.CCGRemoveInstance, schema2.ContainerCredentialGuardRemoveInstanceRequest{Id: "gmsa-1"})); err != nil {
		t.Fatal(err)
	}
	if in := ccgInstances(t, api); len(in) != 0 {
		t.Errorf("instances after remove: %+v", in)
	}
}
