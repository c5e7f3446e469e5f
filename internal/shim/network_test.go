package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// fakeHNS is an HNS with namespaces and their endpoints.
type fakeHNS struct {
	mu      sync.Mutex
	next    int
	ns      map[string][]string
	addErr  map[string]error // endpoint → error of adding it
	dialled int
}

func newFakeHNS() *fakeHNS { return &fakeHNS{ns: map[string][]string{}, addErr: map[string]error{}} }

func (f *fakeHNS) dial() (task.HNS, error) {
	f.mu.Lock()
	f.dialled++
	f.mu.Unlock()
	return f, nil
}

func (f *fakeHNS) GetNamespace(ctx context.Context, id string) (*hcn.HostComputeNamespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	eps, ok := f.ns[id]
	if !ok {
		return nil, fmt.Errorf("namespace %s: %w", id, errdefs.ErrNotFound)
	}
	ns := &hcn.HostComputeNamespace{Id: id, Type: hcn.NamespaceHost}
	for _, ep := range eps {
		b, _ := json.Marshal(hcn.NamespaceResourceData{Id: ep})
		ns.Resources = append(ns.Resources, hcn.NamespaceResource{Type: hcn.ResourceEndpoint, Data: b})
	}
	return ns, nil
}

func (f *fakeHNS) GetEndpoint(ctx context.Context, id string) (*hcn.HostComputeEndpoint, error) {
	return &hcn.HostComputeEndpoint{Id: id, MacAddress: "00-15-5D-00-00-" + id[len(id)-2:]}, nil
}

func (f *fakeHNS) CreateNamespace(ctx context.Context, typ string) (*hcn.HostComputeNamespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.next)
	f.ns[id] = nil
	return &hcn.HostComputeNamespace{Id: id, Type: typ}, nil
}

func (f *fakeHNS) AddNamespaceEndpoint(ctx context.Context, ns, ep string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.addErr[ep]; err != nil {
		return err
	}
	if _, ok := f.ns[ns]; !ok {
		return errdefs.ErrNotFound
	}
	f.ns[ns] = append(f.ns[ns], ep)
	return nil
}

func (f *fakeHNS) RemoveNamespaceEndpoint(ctx context.Context, ns, ep string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	eps, ok := f.ns[ns]
	if !ok || !slices.Contains(eps, ep) {
		return fmt.Errorf("endpoint %s in namespace %s: %w", ep, ns, errdefs.ErrNotFound)
	}
	f.ns[ns] = slices.DeleteFunc(eps, func(e string) bool { return e == ep })
	return nil
}

func (f *fakeHNS) DeleteNamespace(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ns[id]; !ok {
		return errdefs.ErrNotFound
	}
	delete(f.ns, id)
	return nil
}

func (f *fakeHNS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ns)
}

// Endpoint ids, GUIDs as HNS makes them.
const (
	ep1   = "0b0e5f3c-1111-4222-8333-000000000001"
	ep2   = "0b0e5f3c-1111-4222-8333-000000000002"
	epBad = "0b0e5f3c-1111-4222-8333-0000000000ff"
)

func endpointSpec(eps ...string) *specs.Spec {
	s := testSpec()
	s.Windows.Network = &specs.WindowsNetwork{EndpointList: eps, DNSSearchList: []string{"svc.local"}}
	return s
}

// TestEndpointListNamespace: a spec with endpoints and no namespace gets a namespace the shim
// makes (as hcsshim does), named in the document; delete removes the endpoints from it and
// the namespace, and so does the delete action after a crash.
func TestEndpointListNamespace(t *testing.T) {
	for _, how := range []string{"delete", "delete action"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			f := newFakeHNS()
			h.svc.deps.HNS = f.dial
			req := h.bundle("c1", endpointSpec(ep1, ep2))
			p := h.createStart(req)
			doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
			n := doc.Container.Networking
			if n == nil || n.Namespace == "" || len(n.NetworkAdapters) != 0 || n.DnsSearchList != "svc.local" {
				t.Fatalf("networking %+v: want the shim's namespace instead of the adapters, DNS kept", n)
			}
			if eps := f.ns[n.Namespace]; !slices.Equal(eps, []string{ep1, ep2}) {
				t.Fatalf("namespace %s holds %q", n.Namespace, eps)
			}
			switch how {
			case "delete":
				p.exit(0)
				if _, err := h.svc.Wait(context.Background(), &taskapi.WaitRequest{ID: "c1"}); err != nil {
					t.Fatal(err)
				}
				if _, err := h.svc.Delete(context.Background(), &taskapi.DeleteRequest{ID: "c1"}); err != nil {
					t.Fatal(err)
				}
			case "delete action":
				// The shim died: containerd runs the delete action, which reads the bundle.
				deps := h.svc.deps
				if _, err := task.Cleanup(context.Background(), deps, "c1", req.Bundle); err != nil {
					t.Fatal(err)
				}
			}
			if f.count() != 0 {
				t.Errorf("namespaces left: %v", f.ns)
			}
		})
	}
}

// TestEndpointListFailureLeavesNothing: an endpoint HNS refuses fails the create naming it, and
// the namespace made for the task is removed with the endpoints already added.
func TestEndpointListFailureLeavesNothing(t *testing.T) {
	h := newHarness(t)
	f := newFakeHNS()
	f.addErr[epBad] = errors.New("HCN_E_ENDPOINT_NOT_FOUND")
	h.svc.deps.HNS = f.dial
	req := h.bundle("c1", endpointSpec(ep1, epBad))
	_, err := h.svc.Create(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), `endpointList[1]="`+epBad+`"`) {
		t.Fatalf("err = %v, want one naming the endpoint", err)
	}
	if f.count() != 0 || h.host.system("c1") != nil || h.layers.count() != 0 {
		t.Errorf("left: namespaces %v, system %v, mounts %d", f.ns, h.host.system("c1") != nil, h.layers.count())
	}
	if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state left behind: %v", err)
	}
}

// TestCRINamespace: with the namespace CRI made, the shim uses it as it is and never talks to
// HNS; the pause container and the pod's containers name the same namespace.
func TestCRINamespace(t *testing.T) {
	h := newHarness(t)
	f := newFakeHNS()
	h.svc.deps.HNS = f.dial
	const ns = "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"
	for _, id := range []string{"pause", "app"} {
		s := testSpec()
		s.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: ns, EndpointList: []string{"ignored"}}
		h.createStart(h.bundle(id, s))
		n := h.host.system(id).doc.(*schema2.ComputeSystem).Container.Networking
		if n == nil || n.Namespace != ns || len(n.NetworkAdapters) != 0 {
			t.Errorf("%s: networking %+v, want namespace %s", id, n, ns)
		}
	}
	if f.dialled != 0 {
		t.Errorf("the shim talked to HNS %d times for a CRI namespace", f.dialled)
	}
}
