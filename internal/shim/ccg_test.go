package shim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/shim/task"
)

const shimCredSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"}]}}`

// TestCredentialGuardLifecycle: a task with a credential spec gets a Container Credential Guard
// instance named by its id, which its document names, and which goes with the task: on Delete,
// on a failed create, and by the delete action after a crash.
func TestCredentialGuardLifecycle(t *testing.T) {
	ctx := context.Background()
	spec := testSpec()
	spec.Windows.CredentialSpec = shimCredSpec

	t.Run("create and delete", func(t *testing.T) {
		h := newHarness(t)
		req := h.bundle("c1", spec)
		p := h.createStart(req)
		if got := h.host.credentialGuards(); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("instances %v, want [c1]", got)
		}
		doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
		if st := doc.Container.ContainerCredentialGuard; st == nil || st.RpcEndpoint != "ep-c1" || st.Transport != schema2.CCGTransportLRPC || st.CredentialSpec != shimCredSpec {
			t.Fatalf("document's ContainerCredentialGuard %+v", st)
		}
		p.exit(0)
		h.waitEvents(3)
		if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances after Delete: %v", got)
		}
	})
	t.Run("failed create", func(t *testing.T) {
		h := newHarness(t)
		h.host.createErr = errors.New("injected")
		if _, err := h.svc.Create(ctx, h.bundle("c1", spec)); err == nil {
			t.Fatal("Create succeeded")
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances after a failed create: %v", got)
		}
	})
	t.Run("delete action", func(t *testing.T) {
		h := newHarness(t)
		req := h.bundle("c1", spec)
		h.createStart(req)
		if _, err := task.Cleanup(ctx, task.Deps{Host: h.host, Mounter: h.layers, CCG: h.host}, "c1", req.Bundle); err != nil {
			t.Fatal(err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances after the delete action: %v", got)
		}
	})
	t.Run("Hyper-V isolation refused", func(t *testing.T) {
		h := newHarness(t)
		hv := testSpec()
		hv.Windows.CredentialSpec = shimCredSpec
		hv.Windows.HyperV = &specs.WindowsHyperV{}
		_, err := h.svc.Create(ctx, h.bundle("c1", hv))
		if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), "windows.credentialSpec") {
			t.Errorf("Create = %v, want NotImplemented naming windows.credentialSpec", err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances: %v", got)
		}
	})
}
