package shim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"

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
}

// hvCredBundle is hvBundle with the credential spec.
func (h *harness) hvCredBundle(id, kind string, parents ...string) *taskapi.CreateTaskRequest {
	h.t.Helper()
	req := h.hvBundle(id, kind, parents...)
	spec, err := task.ReadSpec(req.Bundle)
	if err != nil {
		h.t.Fatal(err)
	}
	spec.Windows.CredentialSpec = shimCredSpec
	writeSpec(h.t, req.Bundle, spec)
	return req
}

// TestCredentialGuardHyperV: a container in a Hyper-V pod gets an instance of transport
// HvSocket whose service is added to the pod's VM before the container is created (hcsshim's
// resources_wcow.go); the container's document names the instance; the service entry and the
// instance go with the task (Delete, a failed create, a failed service add, the delete action
// after a crash), and the VM stays.
func TestCredentialGuardHyperV(t *testing.T) {
	ctx := context.Background()
	pod := func(t *testing.T) (*harness, *fakeSystem, string, string) {
		h := newHarness(t)
		pause, app, _ := h.hvLayers()
		if _, err := h.svc.Create(ctx, h.hvBundle("pod", "sandbox", pause)); err != nil {
			t.Fatal(err)
		}
		return h, h.host.system("pod@vm"), pause, app
	}
	noneLeft := func(t *testing.T, h *harness, vm *fakeSystem) {
		t.Helper()
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances left: %v", got)
		}
		if got := vm.hvSocketServices(); len(got) != 0 {
			t.Errorf("HvSocket services left in the VM: %v", got)
		}
		if vm.terminated != 0 {
			t.Error("the pod's VM was stopped")
		}
	}

	t.Run("create and delete", func(t *testing.T) {
		h, vm, pause, app := pod(t)
		p := h.createStart(h.hvCredBundle("c1", "container", app, pause))
		if got := h.host.credentialGuards(); !slices.Equal(got, []string{"c1"}) {
			t.Fatalf("instances %v, want [c1]", got)
		}
		if got := vm.hvSocketServices(); !slices.Equal(got, []string{fakeServiceID("c1")}) {
			t.Fatalf("VM's HvSocket services %v, want the instance's %s", got, fakeServiceID("c1"))
		}
		vm.mu.Lock()
		var upd *schema2.ModifySettingRequest
		for _, m := range vm.modified {
			if strings.HasSuffix(m.ResourcePath, fakeServiceID("c1")) {
				upd = m
				break
			}
		}
		vm.mu.Unlock()
		if cfg, ok := upd.Settings.(*schema2.HvSocketServiceConfig); upd.RequestType != schema2.RequestTypeUpdate || !ok || cfg.ConnectSecurityDescriptor != "D:P(A;;FA;;;SY)" {
			t.Errorf("service request %+v, want an Update with the instance's ServiceConfig", upd)
		}
		hosted := h.host.system("c1").doc.(*schema2.ComputeSystem).HostedSystem.(*schema2.HostedSystem)
		if st := hosted.Container.ContainerCredentialGuard; st == nil || st.RpcEndpoint != "ep-c1" || st.Transport != schema2.CCGTransportHvSocket || st.CredentialSpec != shimCredSpec {
			t.Fatalf("hosted document's ContainerCredentialGuard %+v", st)
		}
		p.exit(0)
		if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		noneLeft(t, h, vm)
	})
	t.Run("failed create", func(t *testing.T) {
		h, vm, pause, app := pod(t)
		h.host.mu.Lock()
		h.host.createErr = errors.New("injected")
		h.host.mu.Unlock()
		if _, err := h.svc.Create(ctx, h.hvCredBundle("c1", "container", app, pause)); err == nil {
			t.Fatal("Create succeeded")
		}
		noneLeft(t, h, vm)
	})
	t.Run("the VM refuses the service", func(t *testing.T) {
		h, vm, pause, app := pod(t)
		vm.mu.Lock()
		vm.modifyErr = errors.New("injected")
		vm.mu.Unlock()
		_, err := h.svc.Create(ctx, h.hvCredBundle("c1", "container", app, pause))
		if err == nil || !strings.Contains(err.Error(), "HvSocket service") {
			t.Fatalf("Create = %v, want the HvSocket service's failure", err)
		}
		noneLeft(t, h, vm)
		if h.host.system("c1") != nil {
			t.Error("the container was created")
		}
	})
	t.Run("delete action", func(t *testing.T) {
		h, vm, pause, app := pod(t)
		req := h.hvCredBundle("c1", "container", app, pause)
		h.createStart(req)
		// The shim died: its VM went with its handles (ShouldTerminateOnLastHandleClosed), the
		// instance is the host's and the delete action removes it.
		_ = vm.Terminate(ctx)
		if _, err := task.Cleanup(ctx, task.Deps{Host: h.host, Mounter: h.layers, CCG: h.host}, "c1", req.Bundle); err != nil {
			t.Fatal(err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances after the delete action: %v", got)
		}
	})
	t.Run("standalone", func(t *testing.T) {
		// A Hyper-V task outside a pod: its own VM carries the service, which goes before the
		// VM does.
		h := newHarness(t)
		pause, app, _ := h.hvLayers()
		req := h.hvBundle("c1", "container", app, pause)
		spec := testSpec()
		spec.Windows.CredentialSpec = shimCredSpec
		req.Bundle = h.bundle("c1", spec).Bundle // no CRI annotations
		p := h.createStart(req)
		vm := h.host.system("c1@vm")
		if got := vm.hvSocketServices(); !slices.Equal(got, []string{fakeServiceID("c1")}) {
			t.Fatalf("VM's HvSocket services %v, want the instance's", got)
		}
		p.exit(0)
		if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 {
			t.Errorf("instances left: %v", got)
		}
		vm.mu.Lock()
		last := vm.modified[len(vm.modified)-1]
		vm.mu.Unlock()
		if last.RequestType != schema2.RequestTypeRemove || !strings.HasSuffix(last.ResourcePath, fakeServiceID("c1")) || vm.terminated == 0 {
			t.Errorf("last VM request %+v, terminated %d: want the service removed, then the VM stopped", last, vm.terminated)
		}
	})
	t.Run("a sandbox's spec refused", func(t *testing.T) {
		h := newHarness(t)
		pause, _, _ := h.hvLayers()
		_, err := h.svc.Create(ctx, h.hvCredBundle("pod", "sandbox", pause))
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "windows.credentialSpec") {
			t.Errorf("Create = %v, want InvalidArgument naming windows.credentialSpec", err)
		}
		if got := h.host.credentialGuards(); len(got) != 0 || h.host.system("pod@vm") != nil {
			t.Errorf("instances %v, VM %v", got, h.host.system("pod@vm"))
		}
	})
}
