package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
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

// addCCG adds instance id over transport through the engine and returns it as the service
// property lists it.
func addCCG(t *testing.T, e *Engine, id, transport string) schema2.ContainerCredentialGuardInstance {
	t.Helper()
	add := schema2.ContainerCredentialGuardAddInstanceRequest{Id: id, CredentialSpec: testCredSpec, Transport: transport}
	if err := e.ModifyServiceSettings(context.Background(), ccgRequest(t, schema2.CCGAddInstance, add)); err != nil {
		t.Fatal(err)
	}
	for _, in := range e.ccg.info().Instances {
		if in.Id == id {
			return in
		}
	}
	t.Fatalf("instance %s not listed", id)
	return schema2.ContainerCredentialGuardInstance{}
}

// TestHostedCredentialGuard: a container in a utility VM reaches an HvSocket instance only
// through the instance's service in the VM's HvSocket service table, which Update adds and
// Remove removes (refused while the container uses it); it then sees its domain as a
// process-isolated gMSA container does. An LRPC instance is refused in a VM, an HvSocket one in
// a process-isolated container.
func TestHostedCredentialGuard(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	_, layer := startVM(t, e, "pod@vm", "10.0.20348.1", 256)
	ctx := context.Background()
	hv := addCCG(t, e, "gmsa-hv", schema2.CCGTransportHvSocket)
	lrpc := addCCG(t, e, "gmsa-lrpc", schema2.CCGTransportLRPC)
	if hv.HvSocketConfig == nil || hv.HvSocketConfig.ServiceId != CCGServiceID("gmsa-hv") || !guidRe.MatchString(hv.HvSocketConfig.ServiceId) || hv.HvSocketConfig.ServiceConfig == nil {
		t.Fatalf("HvSocket instance %+v: want an HvSocketConfig with a service GUID", hv)
	}
	if lrpc.HvSocketConfig != nil {
		t.Errorf("LRPC instance has an HvSocket service: %+v", lrpc.HvSocketConfig)
	}
	svcPath := fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, hv.HvSocketConfig.ServiceId)

	// The first container's storage is made, then its create refused: the VM lacks the service.
	mount := `C:\mounts\scsi\c1`
	layers := []schema2.Layer{{Id: "1", Path: schema2.VSMBGuestPath("sc1")}}
	_, err := hostContainerWith(t, e, "pod@vm", "c1", layer, newRecorder(), func(c *schema2.Container) { c.ContainerCredentialGuard = hv.CredentialGuard })
	if !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(err.Error(), "ContainerCredentialGuard") || !strings.Contains(err.Error(), strings.ToLower(hv.HvSocketConfig.ServiceId)) {
		t.Fatalf("hosted container without its instance's service in the VM: %v, want E_INVALIDARG naming the service", err)
	}
	create := func(id string, st *schema2.ContainerCredentialGuardState) error {
		doc, _ := json.Marshal(schema2.ComputeSystem{Owner: "test", SchemaVersion: &schema2.SchemaV21, HostingSystemId: "pod@vm",
			HostedSystem: schema2.HostedSystem{SchemaVersion: &schema2.SchemaV21, Container: &schema2.Container{
				Storage: &schema2.Storage{Path: mount, Layers: layers}, ContainerCredentialGuard: st}}})
		if _, err := e.CreateSystem(ctx, id, string(doc), newRecorder()); err != nil {
			return err
		}
		return e.Start(ctx, wire.SystemRef{ID: id}, "")
	}
	if err := create("c-lrpc", lrpc.CredentialGuard); !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(err.Error(), "transport is LRPC") {
		t.Errorf("hosted container naming an LRPC instance: %v, want E_INVALIDARG naming the transport", err)
	}

	// Bad service requests.
	for _, tc := range []struct {
		name string
		req  schema2.ModifySettingRequest
		hr   computecore.HRESULT
	}{
		{"Add", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeAdd, Settings: hv.HvSocketConfig.ServiceConfig}, computecore.E_INVALIDARG},
		{"not a GUID", schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, "ccg"), RequestType: schema2.RequestTypeUpdate, Settings: hv.HvSocketConfig.ServiceConfig}, computecore.E_INVALIDARG},
		{"no settings", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeUpdate}, computecore.HCS_E_INVALID_JSON},
		{"remove absent", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeRemove}, errAbsent},
	} {
		if err := modify(e, "pod@vm", tc.req); !errors.Is(err, tc.hr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.hr)
		}
	}

	// With the service in the VM the container is made and sees its domain.
	if err := modify(e, "pod@vm", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeUpdate, Settings: hv.HvSocketConfig.ServiceConfig}); err != nil {
		t.Fatalf("add the instance's service: %v", err)
	}
	if err := create("c1", hv.CredentialGuard); err != nil {
		t.Fatalf("hosted gMSA container: %v", err)
	}
	keep := runInBackground(t, e, "c1", `C:\workload\workload.exe sleep 600`)
	code, out := runIn(t, e, "c1", `C:\workload\workload.exe env USERDOMAIN USERDNSDOMAIN HCSEMU_NETWORK_IDENTITY`)
	if want := "USERDOMAIN=User Manager\nUSERDNSDOMAIN=CONTOSO.COM\nHCSEMU_NETWORK_IDENTITY=CONTOSO\\webapp01$\n"; code != 0 || out != want {
		t.Errorf("env in the hosted gMSA container: exit %d, %q, want %q", code, out, want)
	}
	if err := modify(e, "pod@vm", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeRemove}); !errors.Is(err, errShareInUse) {
		t.Errorf("remove the service its container uses: %v, want ERROR_BUSY", err)
	}
	if err := e.Terminate(ctx, wire.SystemRef{ID: "c1"}, ""); err != nil {
		t.Fatal(err)
	}
	<-keep
	e.CloseSystem(ctx, wire.SystemRef{ID: "c1"}, nil)
	if err := modify(e, "pod@vm", schema2.ModifySettingRequest{ResourcePath: svcPath, RequestType: schema2.RequestTypeRemove}); err != nil {
		t.Errorf("remove the service after its container: %v", err)
	}

	// A process-isolated container cannot reach an HvSocket instance.
	doc := containerConfig(newVolume(t), `,"ContainerCredentialGuard":`+mustJSON(t, hv.CredentialGuard))
	_, err = e.CreateSystem(ctx, "proc-hv", doc, newRecorder())
	if err == nil {
		err = e.Start(ctx, wire.SystemRef{ID: "proc-hv"}, "")
	}
	if !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(err.Error(), "transport is HvSocket") {
		t.Errorf("process-isolated container naming an HvSocket instance: %v, want E_INVALIDARG naming the transport", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
