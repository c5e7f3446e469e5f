package task

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The network of a task. CRI (containerd on Windows) makes each pod's HNS namespace itself and
// passes it in spec.windows.network.networkNamespace: the task's document names it (internal/oci)
// and there is nothing for the shim to do. A spec that lists endpoints
// (windows.network.endpointList) without a namespace gets one from the shim, as hcsshim does
// (internal/hcsoci/network.go createNetworkNamespace): the shim creates an HNS namespace, adds
// the endpoints, names it in the document, and on delete removes the endpoints and the
// namespace, so a torn-down task leaves no endpoint attached. The namespace's id is recorded
// in the bundle state first, so the delete action cleans up after a crash too.
//
// A Hyper-V pod's network is its utility VM's (hosted.go networkVM): the sandbox's namespace (or
// one made for its endpoint list) is added to the VM with its endpoints as NICs, and the pod's
// containers, which name that namespace, need nothing more; a container of the pod with an
// endpoint list of its own is refused. A Hyper-V task outside a pod networks its own VM alike.

// DefaultHNS is the platform's HNS (computenetwork.dll, or hcsemu's), for Deps.HNS.
func DefaultHNS() (HNS, error) {
	api, err := hns.DefaultAPI()
	if err != nil {
		return nil, fmt.Errorf("HNS: %w", err)
	}
	return hns.NewClient(api), nil
}

// OwnEndpoints returns the endpoints the shim must put in a namespace of its own: the spec's
// endpoint list when it names no namespace (nil otherwise).
func OwnEndpoints(spec *specs.Spec) []string {
	n := spec.Windows.Network
	if n == nil || n.NetworkNamespace != "" {
		return nil
	}
	return n.EndpointList
}

// createNamespace makes an HNS namespace holding endpoints; record is called with its id as
// soon as it exists. On failure it removes what it made.
func createNamespace(ctx context.Context, dial func() (HNS, error), endpoints []string, record func(id string) error) (string, error) {
	c, err := dial()
	if err != nil {
		return "", err
	}
	ns, err := c.CreateNamespace(ctx, hcn.NamespaceHost)
	if err != nil {
		return "", fmt.Errorf("windows.network.endpointList: create an HNS namespace for it: %w", err)
	}
	if err := record(ns.Id); err != nil {
		c.DeleteNamespace(context.WithoutCancel(ctx), ns.Id)
		return "", err
	}
	for i, ep := range endpoints {
		if err := c.AddNamespaceEndpoint(ctx, ns.Id, ep); err != nil {
			err = fmt.Errorf("windows.network.endpointList[%d]=%q: %w", i, ep, err)
			return "", errors.Join(err, deleteNamespace(context.WithoutCancel(ctx), dial, ns.Id, endpoints[:i]))
		}
	}
	return ns.Id, nil
}

// deleteNamespace removes endpoints from a namespace the shim made and deletes it; what is
// already gone is fine, so it can run any number of times.
func deleteNamespace(ctx context.Context, dial func() (HNS, error), id string, endpoints []string) error {
	c, err := dial()
	if err != nil {
		return err
	}
	var errs []error
	for _, ep := range endpoints {
		if err := c.RemoveNamespaceEndpoint(ctx, id, ep); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := c.DeleteNamespace(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		log.G(ctx).WithField("namespace", id).Debug("HNS namespace of the task removed")
	}
	return errors.Join(errs...)
}
