package compute

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// Container Credential Guard instances (docs/emulator.md, "gMSA"): what HcsModifyServiceSettings adds and
// removes, the service property "ContainerCredentialGuard" lists, and a container document names
// in Container.ContainerCredentialGuard.

type ccgInstance struct {
	state schema2.ContainerCredentialGuardState
	spec  *schema2.CredentialSpec
	// hv is the HvSocket service of an instance of transport HvSocket, nil for LRPC.
	hv *schema2.ContainerCredentialGuardHvSocketServiceConfig
}

// ccgServiceConfig is the service table entry of an HvSocket instance. Assumption: Microsoft
// documents neither the entry CCG returns nor its descriptors; hcsshim passes it to the VM as it
// is (hcsoci/resources_wcow.go). The emulator lets SYSTEM (CCG runs as a service on the host)
// bind and connect, as the descriptors hcsshim gives its own services (docs/notes/hyperv.md §1).
func ccgServiceConfig() *schema2.HvSocketServiceConfig {
	return &schema2.HvSocketServiceConfig{BindSecurityDescriptor: "D:P(A;;FA;;;SY)", ConnectSecurityDescriptor: "D:P(A;;FA;;;SY)"}
}

// ccgTable is the service's instances, by id. They live as long as the daemon, as instances
// live as long as vmcompute (hcsshim's CCGResource.Release comment): only RemoveInstance ends one.
type ccgTable struct {
	mu   sync.Mutex
	byID map[string]*ccgInstance
}

// modify applies a ContainerCredentialGuardOperationRequest.
func (t *ccgTable) modify(settings json.RawMessage) error {
	var req schema2.ContainerCredentialGuardOperationRequest
	if err := hresult.Decode(string(settings), &req, "Settings"); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch req.Operation {
	case schema2.CCGAddInstance:
		var add schema2.ContainerCredentialGuardAddInstanceRequest
		if err := hresult.Decode(string(req.OperationDetails), &add, "Settings.OperationDetails"); err != nil {
			return err
		}
		if add.Id == "" {
			return hresult.Errorf(computecore.E_INVALIDARG, "Settings.OperationDetails.Id: empty")
		}
		if add.Transport != schema2.CCGTransportLRPC && add.Transport != schema2.CCGTransportHvSocket {
			return hresult.Errorf(computecore.E_INVALIDARG, "Settings.OperationDetails.Transport=%q: want %q or %q", add.Transport, schema2.CCGTransportLRPC, schema2.CCGTransportHvSocket)
		}
		// Assumption: CCG refuses a credential spec it cannot use with E_INVALIDARG; the emulator
		// checks it as the shim does.
		spec, err := schema2.ParseCredentialSpec("Settings.OperationDetails.CredentialSpec", add.CredentialSpec)
		if err != nil {
			return hresult.Errorf(computecore.E_INVALIDARG, "%v", err)
		}
		// Assumption: ERROR_ALREADY_EXISTS (errAlreadyExists) for an id CCG has (undocumented;
		// hcsshim never adds one twice).
		if _, ok := t.byID[add.Id]; ok {
			return hresult.Errorf(errAlreadyExists, "Settings.OperationDetails.Id=%q: a Container Credential Guard instance with that id exists", add.Id)
		}
		if t.byID == nil {
			t.byID = map[string]*ccgInstance{}
		}
		// The cookie authenticates the container's calls and the endpoint is the instance's RPC
		// endpoint; real values are opaque, the emulator's are random.
		in := &ccgInstance{spec: spec, state: schema2.ContainerCredentialGuardState{
			Cookie: randomHex(16), RpcEndpoint: "ccg-" + randomHex(8), Transport: add.Transport, CredentialSpec: add.CredentialSpec,
		}}
		if add.Transport == schema2.CCGTransportHvSocket {
			// An HvSocket instance is reached through a service of its own, which the client
			// adds to the VM of the container (hcsshim CreateCredentialGuard, step 4).
			in.hv = &schema2.ContainerCredentialGuardHvSocketServiceConfig{ServiceId: CCGServiceID(add.Id), ServiceConfig: ccgServiceConfig()}
		}
		t.byID[add.Id] = in
		return nil
	case schema2.CCGRemoveInstance:
		var rm schema2.ContainerCredentialGuardRemoveInstanceRequest
		if err := hresult.Decode(string(req.OperationDetails), &rm, "Settings.OperationDetails"); err != nil {
			return err
		}
		if _, ok := t.byID[rm.Id]; !ok {
			// Assumption: ERROR_NOT_FOUND, as HCS answers other lookups of unknown ids.
			return hresult.Errorf(computecore.E_ELEMENT_NOT_FOUND, "Settings.OperationDetails.Id=%q: no Container Credential Guard instance with that id", rm.Id)
		}
		delete(t.byID, rm.Id)
		return nil
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "Settings.Operation=%q: want %q or %q", req.Operation, schema2.CCGAddInstance, schema2.CCGRemoveInstance)
	}
}

// info is the service property: every instance, by id.
func (t *ccgTable) info() schema2.ContainerCredentialGuardSystemInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.byID))
	for id := range t.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var info schema2.ContainerCredentialGuardSystemInfo
	for _, id := range ids {
		in := t.byID[id]
		st := in.state
		i := schema2.ContainerCredentialGuardInstance{Id: id, CredentialGuard: &st}
		if in.hv != nil {
			cfg := *in.hv.ServiceConfig
			i.HvSocketConfig = &schema2.ContainerCredentialGuardHvSocketServiceConfig{ServiceId: in.hv.ServiceId, ServiceConfig: &cfg}
		}
		info.Instances = append(info.Instances, i)
	}
	return info
}

// resolve finds the instance a container document's ContainerCredentialGuard names (by its RPC
// endpoint and cookie, what the container's calls use) and returns the domain identity the
// container gets and, for an HvSocket instance, its service GUID (lower case; "" for LRPC). A
// container reaches an LRPC instance from the host's own silos only and an HvSocket one only from
// a utility VM, so hosted says which the container is. Assumption: HCS refuses a container naming
// no instance, or one it cannot reach, with E_INVALIDARG (undocumented; hcsshim always names the
// instance it made for the container, of the transport its isolation needs).
func (t *ccgTable) resolve(field string, st *schema2.ContainerCredentialGuardState, hosted bool) (_ *domainIdentity, service string, _ error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.byID {
		if in.state.RpcEndpoint != st.RpcEndpoint || in.state.Cookie != st.Cookie {
			continue
		}
		want := schema2.CCGTransportLRPC
		if hosted {
			want = schema2.CCGTransportHvSocket
		}
		if in.state.Transport != want {
			return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "%s: RpcEndpoint=%q: the instance's transport is %s; a %s container reaches its instance over %s", field, st.RpcEndpoint, in.state.Transport, isolationName(hosted), want)
		}
		if in.hv != nil {
			service = strings.ToLower(in.hv.ServiceId)
		}
		d := in.spec.DomainJoinConfig
		return &domainIdentity{
			netBIOS: d.NetBiosName,
			dns:     d.DnsName,
			account: in.spec.ActiveDirectoryConfig.GroupManagedServiceAccounts[0].Name,
		}, service, nil
	}
	return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "%s: RpcEndpoint=%q: no Container Credential Guard instance has that endpoint and cookie", field, st.RpcEndpoint)
}

func isolationName(hosted bool) string {
	if hosted {
		return "Hyper-V isolated"
	}
	return "process-isolated"
}

// domainIdentity is what a gMSA container's processes see of their domain.
type domainIdentity struct {
	netBIOS, dns, account string
}

// NetworkIdentityVariable is the emulator's way of showing a process the account its container
// authenticates as on the network (Windows shows it through Kerberos, e.g. klist, which the
// emulator does not have): "NETBIOS\account$", the gMSA's machine account (its sAMAccountName ends
// in "$"). test/workload's whoami prints it.
const NetworkIdentityVariable = "HCSEMU_NETWORK_IDENTITY"

// addTo sets what a process of a gMSA container sees of its domain. Its own account does not
// change: whoami in a gMSA container still shows "user manager\containeradministrator" (and
// nltest /parentdomain the domain; microsoft/nav-docker#292), so USERNAME and USERDOMAIN stay the
// account's. Assumption: USERDNSDOMAIN is the domain's DNS name in upper case, as Windows shows it
// for a domain logon (CONTOSO.COM), for every account of the container.
func (d *domainIdentity) addTo(env map[string]string) {
	env["USERDNSDOMAIN"] = strings.ToUpper(d.dns)
	env[NetworkIdentityVariable] = d.netBIOS + `\` + d.account + "$"
}

// CCGServiceID is the HvSocket service GUID of the emulator's instance id. Assumption: CCG's
// service GUIDs are opaque (undocumented); the emulator derives them from the instance id (a
// name-based GUID, RFC 9562 version 5 form) so that a test can name the entry of an instance
// already removed, and ask the VM whether it is still there.
func CCGServiceID(instanceID string) string {
	h := sha1.Sum([]byte("hcsemu-ccg-hvsocket-service\x00" + instanceID))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
