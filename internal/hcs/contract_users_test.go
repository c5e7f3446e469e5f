package hcs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

const contractCredSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"}]}}`

// TestContractUsers: ProcessParameters.User names the account a process runs as; one the
// container lacks is ERROR_LOGON_FAILURE.
func TestContractUsers(t *testing.T) {
	env := requireContract(t)
	s := newContainer(t, env, true)
	keepAlive(t, s)
	p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("env", "USERNAME", "USERPROFILE"), User: `User Manager\ContainerAdministrator`, CreateStdOutPipe: true})
	_, out, _ := p.Stdio()
	if got, want := readAll(t, out, 30*time.Second), "USERNAME=ContainerAdministrator\nUSERPROFILE=C:\\Users\\ContainerAdministrator\n"; got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
	waitExit(t, p, 30*time.Second)
	_, err := s.CreateProcess(testCtx(t), &schema2.ProcessParameters{CommandLine: workload("exit", "0"), User: "nobody"})
	if !errors.Is(err, computecore.E_LOGON_FAILURE) || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("CreateProcess as nobody: %v, want ERROR_LOGON_FAILURE naming the user", err)
	}
}

// TestContractCredentialGuard: a Container Credential Guard instance is added and removed through
// HcsModifyServiceSettings and listed by HcsGetServiceProperties; a container naming it runs in
// its domain.
func TestContractCredentialGuard(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)
	id := testID(t)
	in, err := env.hcs.AddCredentialGuard(ctx, id, contractCredSpec, schema2.CCGTransportLRPC)
	if err != nil {
		t.Fatal(err)
	}
	st := in.CredentialGuard
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = env.hcs.RemoveCredentialGuard(ctx, id)
		}
	})
	if st.Cookie == "" || st.RpcEndpoint == "" || st.Transport != schema2.CCGTransportLRPC || st.CredentialSpec != contractCredSpec {
		t.Errorf("instance state %+v", st)
	}
	if in.HvSocketConfig != nil {
		t.Errorf("an LRPC instance has an HvSocket service %+v", in.HvSocketConfig)
	}
	if _, err := env.hcs.AddCredentialGuard(ctx, id, contractCredSpec, schema2.CCGTransportLRPC); err == nil {
		t.Error("a second instance with the same id was added")
	}

	s := newContainer(t, env, true, func(c *schema2.Container) { c.ContainerCredentialGuard = st })
	keepAlive(t, s)
	p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("env", "USERDOMAIN", "USERDNSDOMAIN"), CreateStdOutPipe: true})
	_, out, _ := p.Stdio()
	if got, want := readAll(t, out, 30*time.Second), "USERDOMAIN=User Manager\nUSERDNSDOMAIN=CONTOSO.COM\n"; got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
	waitExit(t, p, 30*time.Second)

	if err := env.hcs.RemoveCredentialGuard(ctx, id); err != nil {
		t.Fatal(err)
	}
	removed = true
	list, err := env.hcs.CredentialGuards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range list {
		if i.Id == id {
			t.Errorf("instance %s listed after its removal", id)
		}
	}
	if err := env.hcs.RemoveCredentialGuard(ctx, id); !IsGone(err) {
		t.Errorf("removing it again: %v, want not found", err)
	}

	// An instance for a container in a utility VM (transport HvSocket) comes with the HvSocket
	// service the VM must carry (hcsshim's resources_wcow.go adds it to the VM).
	hvID := id + "-hv"
	hv, err := env.hcs.AddCredentialGuard(ctx, hvID, contractCredSpec, schema2.CCGTransportHvSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer env.hcs.RemoveCredentialGuard(ctx, hvID)
	if hv.CredentialGuard.Transport != schema2.CCGTransportHvSocket || hv.HvSocketConfig == nil || !schema2.IsGUID(hv.HvSocketConfig.ServiceId) || hv.HvSocketConfig.ServiceConfig == nil {
		t.Errorf("HvSocket instance %+v (service %+v), want a service GUID and its config", hv.CredentialGuard, hv.HvSocketConfig)
	}
}
