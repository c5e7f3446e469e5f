package hns

import (
	"context"
	"encoding/json"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// The four object kinds share one shape: create (handle, query, close), get (open, query,
// close), list (enumerate, then get each), modify and delete by id. kind gives the API's
// functions for one kind, over uintptr handles.
type kind struct {
	name      string
	enumerate func(api computenetwork.API, query string) (string, error)
	open      func(api computenetwork.API, id computenetwork.GUID) (uintptr, error)
	query     func(api computenetwork.API, h uintptr, query string) (string, error)
	modify    func(api computenetwork.API, h uintptr, settings string) error
	del       func(api computenetwork.API, id computenetwork.GUID) error
	close     func(api computenetwork.API, h uintptr) error
}

var networkKind = kind{
	name:      "network",
	enumerate: computenetwork.API.EnumerateNetworks,
	open: func(api computenetwork.API, id computenetwork.GUID) (uintptr, error) {
		h, err := api.OpenNetwork(id)
		return uintptr(h), err
	},
	query: func(api computenetwork.API, h uintptr, q string) (string, error) {
		return api.QueryNetworkProperties(computenetwork.Network(h), q)
	},
	modify: func(api computenetwork.API, h uintptr, s string) error {
		return api.ModifyNetwork(computenetwork.Network(h), s)
	},
	del:   computenetwork.API.DeleteNetwork,
	close: func(api computenetwork.API, h uintptr) error { return api.CloseNetwork(computenetwork.Network(h)) },
}

var endpointKind = kind{
	name:      "endpoint",
	enumerate: computenetwork.API.EnumerateEndpoints,
	open: func(api computenetwork.API, id computenetwork.GUID) (uintptr, error) {
		h, err := api.OpenEndpoint(id)
		return uintptr(h), err
	},
	query: func(api computenetwork.API, h uintptr, q string) (string, error) {
		return api.QueryEndpointProperties(computenetwork.Endpoint(h), q)
	},
	modify: func(api computenetwork.API, h uintptr, s string) error {
		return api.ModifyEndpoint(computenetwork.Endpoint(h), s)
	},
	del:   computenetwork.API.DeleteEndpoint,
	close: func(api computenetwork.API, h uintptr) error { return api.CloseEndpoint(computenetwork.Endpoint(h)) },
}

var namespaceKind = kind{
	name:      "namespace",
	enumerate: computenetwork.API.EnumerateNamespaces,
	open: func(api computenetwork.API, id computenetwork.GUID) (uintptr, error) {
		h, err := api.OpenNamespace(id)
		return uintptr(h), err
	},
	query: func(api computenetwork.API, h uintptr, q string) (string, error) {
		return api.QueryNamespaceProperties(computenetwork.Namespace(h), q)
	},
	modify: func(api computenetwork.API, h uintptr, s string) error {
		return api.ModifyNamespace(computenetwork.Namespace(h), s)
	},
	del:   computenetwork.API.DeleteNamespace,
	close: func(api computenetwork.API, h uintptr) error { return api.CloseNamespace(computenetwork.Namespace(h)) },
}

// created queries a freshly created object through its handle, closes the handle and decodes
// the properties into out. On a failure after the create the object is deleted, so that a
// failed create leaves nothing.
func (c *Client) created(k kind, h uintptr, out any) error {
	props, qerr := k.query(c.api, h, defaultQuery())
	k.close(c.api, h)
	if qerr == nil {
		qerr = json.Unmarshal([]byte(props), out)
	}
	return qerr
}

// get opens id, queries its properties into out and closes the handle.
func (c *Client) get(ctx context.Context, k kind, id string, out any) error {
	op := "get " + k.name
	g, err := parseID(op, id)
	if err != nil {
		return err
	}
	props, err := bounded(ctx, op, id, func() (string, error) {
		h, err := k.open(c.api, g)
		if err != nil {
			return "", err
		}
		defer k.close(c.api, h)
		return k.query(c.api, h, defaultQuery())
	}, nil)
	if err != nil {
		return err
	}
	return decode(op, id, props, out)
}

// list enumerates the ids the filter matches and gets each; one deleted in between is left out.
func list[T any](ctx context.Context, c *Client, k kind, f Filter) ([]T, error) {
	op := "list " + k.name + "s"
	q, err := filterQuery(op, f)
	if err != nil {
		return nil, err
	}
	doc, err := bounded(ctx, op, "", func() (string, error) { return k.enumerate(c.api, q) }, nil)
	if err != nil {
		return nil, err
	}
	ids, err := enumerateIDs(op, doc)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		var v T
		if err := c.get(ctx, k, id.String(), &v); err != nil {
			if IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (c *Client) modify(ctx context.Context, k kind, op, id string, req any) error {
	g, err := parseID(op, id)
	if err != nil {
		return err
	}
	settings, err := encode(op, req)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, op, id, func() (struct{}, error) {
		h, err := k.open(c.api, g)
		if err != nil {
			return struct{}{}, err
		}
		defer k.close(c.api, h)
		return struct{}{}, k.modify(c.api, h, settings)
	}, nil)
	return err
}

func (c *Client) del(ctx context.Context, k kind, id string) error {
	op := "delete " + k.name
	g, err := parseID(op, id)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, op, id, func() (struct{}, error) { return struct{}{}, k.del(c.api, g) }, nil)
	return err
}

// ---- networks

// CreateNetwork creates a network (its Id, if set, is the id it gets) and returns it as HNS
// stored it.
func (c *Client) CreateNetwork(ctx context.Context, n *hcn.HostComputeNetwork) (*hcn.HostComputeNetwork, error) {
	const op = "create network"
	d := *n
	d.SchemaVersion = hcn.V2
	settings, err := encode(op, d)
	if err != nil {
		return nil, err
	}
	return bounded(ctx, op, n.Name, func() (*hcn.HostComputeNetwork, error) {
		h, err := c.api.CreateNetwork(computenetwork.GUID{}, settings)
		if err != nil {
			return nil, err
		}
		// HNS leaves NAT (its network mode 0) out of documents (hcsshim's getNetwork).
		out := &hcn.HostComputeNetwork{Type: hcn.NAT}
		if err := c.created(networkKind, uintptr(h), out); err != nil {
			return nil, c.undo(networkKind, out.Id, err)
		}
		return out, nil
	}, func(out *hcn.HostComputeNetwork) { c.undo(networkKind, out.Id, nil) })
}

// undo deletes an object a create made but cannot return; it returns err.
func (c *Client) undo(k kind, id string, err error) error {
	if g, perr := computenetwork.ParseGUID(id); perr == nil {
		k.del(c.api, g)
	}
	return err
}

// GetNetwork returns the network with id.
func (c *Client) GetNetwork(ctx context.Context, id string) (*hcn.HostComputeNetwork, error) {
	out := &hcn.HostComputeNetwork{Type: hcn.NAT}
	return out, c.get(ctx, networkKind, id, out)
}

// ListNetworks returns the networks the filter matches (all with nil).
func (c *Client) ListNetworks(ctx context.Context, f Filter) ([]hcn.HostComputeNetwork, error) {
	return list[hcn.HostComputeNetwork](ctx, c, networkKind, f)
}

// DeleteNetwork deletes a network.
func (c *Client) DeleteNetwork(ctx context.Context, id string) error {
	return c.del(ctx, networkKind, id)
}

// ---- endpoints

// CreateEndpoint creates an endpoint on a network.
func (c *Client) CreateEndpoint(ctx context.Context, networkID string, ep *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error) {
	const op = "create endpoint"
	ng, err := parseID(op, networkID)
	if err != nil {
		return nil, err
	}
	d := *ep
	d.SchemaVersion = hcn.V2
	d.HostComputeNetwork = networkID
	settings, err := encode(op, d)
	if err != nil {
		return nil, err
	}
	return bounded(ctx, op, ep.Name, func() (*hcn.HostComputeEndpoint, error) {
		nh, err := c.api.OpenNetwork(ng)
		if err != nil {
			return nil, err
		}
		defer c.api.CloseNetwork(nh)
		h, err := c.api.CreateEndpoint(nh, computenetwork.GUID{}, settings)
		if err != nil {
			return nil, err
		}
		out := &hcn.HostComputeEndpoint{}
		if err := c.created(endpointKind, uintptr(h), out); err != nil {
			return nil, c.undo(endpointKind, out.Id, err)
		}
		return out, nil
	}, func(out *hcn.HostComputeEndpoint) { c.undo(endpointKind, out.Id, nil) })
}

// GetEndpoint returns the endpoint with id.
func (c *Client) GetEndpoint(ctx context.Context, id string) (*hcn.HostComputeEndpoint, error) {
	out := &hcn.HostComputeEndpoint{}
	return out, c.get(ctx, endpointKind, id, out)
}

// ListEndpoints returns the endpoints the filter matches (all with nil).
func (c *Client) ListEndpoints(ctx context.Context, f Filter) ([]hcn.HostComputeEndpoint, error) {
	return list[hcn.HostComputeEndpoint](ctx, c, endpointKind, f)
}

// ModifyEndpointPolicies adds, removes or replaces (requestType hcn.RequestAdd, RequestRemove,
// RequestUpdate) policies of an endpoint.
func (c *Client) ModifyEndpointPolicies(ctx context.Context, id, requestType string, policies []hcn.EndpointPolicy) error {
	settings, err := json.Marshal(hcn.PolicyEndpointRequest{Policies: policies})
	if err != nil {
		return &Error{Op: "modify endpoint", ID: id, Err: err}
	}
	return c.modify(ctx, endpointKind, "modify endpoint", id, hcn.ModifyEndpointSettingRequest{ResourceType: "Policy", RequestType: requestType, Settings: settings})
}

// DeleteEndpoint deletes an endpoint (detaching it from its namespace).
func (c *Client) DeleteEndpoint(ctx context.Context, id string) error {
	return c.del(ctx, endpointKind, id)
}

// ---- namespaces

// CreateNamespace creates a namespace of type typ ("" means Host).
func (c *Client) CreateNamespace(ctx context.Context, typ string) (*hcn.HostComputeNamespace, error) {
	const op = "create namespace"
	if typ == "" {
		typ = hcn.NamespaceHost
	}
	settings, err := encode(op, hcn.HostComputeNamespace{Type: typ, SchemaVersion: hcn.V2})
	if err != nil {
		return nil, err
	}
	return bounded(ctx, op, "", func() (*hcn.HostComputeNamespace, error) {
		h, err := c.api.CreateNamespace(computenetwork.GUID{}, settings)
		if err != nil {
			return nil, err
		}
		out := &hcn.HostComputeNamespace{}
		if err := c.created(namespaceKind, uintptr(h), out); err != nil {
			return nil, c.undo(namespaceKind, out.Id, err)
		}
		return out, nil
	}, func(out *hcn.HostComputeNamespace) { c.undo(namespaceKind, out.Id, nil) })
}

// GetNamespace returns the namespace with id.
func (c *Client) GetNamespace(ctx context.Context, id string) (*hcn.HostComputeNamespace, error) {
	out := &hcn.HostComputeNamespace{}
	return out, c.get(ctx, namespaceKind, id, out)
}

// ListNamespaces returns the namespaces the filter matches (all with nil).
func (c *Client) ListNamespaces(ctx context.Context, f Filter) ([]hcn.HostComputeNamespace, error) {
	return list[hcn.HostComputeNamespace](ctx, c, namespaceKind, f)
}

// AddNamespaceEndpoint adds an endpoint to a namespace, as hcsshim's AddNamespaceEndpoint does.
func (c *Client) AddNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	return c.namespaceEndpoint(ctx, namespaceID, endpointID, hcn.RequestAdd)
}

// RemoveNamespaceEndpoint removes an endpoint from a namespace.
func (c *Client) RemoveNamespaceEndpoint(ctx context.Context, namespaceID, endpointID string) error {
	return c.namespaceEndpoint(ctx, namespaceID, endpointID, hcn.RequestRemove)
}

func (c *Client) namespaceEndpoint(ctx context.Context, namespaceID, endpointID, rt string) error {
	settings, err := json.Marshal(hcn.NamespaceEndpointRequest{EndpointId: endpointID})
	if err != nil {
		return &Error{Op: "modify namespace", ID: namespaceID, Err: err}
	}
	return c.modify(ctx, namespaceKind, "modify namespace", namespaceID,
		hcn.ModifyNamespaceSettingRequest{ResourceType: hcn.ResourceEndpoint, RequestType: rt, Settings: settings})
}

// NamespaceResources returns the ids of a namespace's endpoints and containers.
func NamespaceResources(ns *hcn.HostComputeNamespace) (endpoints, containers []string) {
	for _, r := range ns.Resources {
		var d hcn.NamespaceResourceData
		if json.Unmarshal(r.Data, &d) != nil {
			continue
		}
		switch r.Type {
		case hcn.ResourceEndpoint:
			endpoints = append(endpoints, d.Id)
		case hcn.ResourceContainer:
			containers = append(containers, d.Id)
		}
	}
	return endpoints, containers
}

// DeleteNamespace deletes a namespace.
func (c *Client) DeleteNamespace(ctx context.Context, id string) error {
	return c.del(ctx, namespaceKind, id)
}

// ---- load balancers

var loadBalancerKind = kind{
	name:      "load balancer",
	enumerate: computenetwork.API.EnumerateLoadBalancers,
	open: func(api computenetwork.API, id computenetwork.GUID) (uintptr, error) {
		h, err := api.OpenLoadBalancer(id)
		return uintptr(h), err
	},
	query: func(api computenetwork.API, h uintptr, q string) (string, error) {
		return api.QueryLoadBalancerProperties(computenetwork.LoadBalancer(h), q)
	},
	modify: func(api computenetwork.API, h uintptr, s string) error {
		return api.ModifyLoadBalancer(computenetwork.LoadBalancer(h), s)
	},
	del: computenetwork.API.DeleteLoadBalancer,
	close: func(api computenetwork.API, h uintptr) error {
		return api.CloseLoadBalancer(computenetwork.LoadBalancer(h))
	},
}

// CreateLoadBalancer creates a load balancer (kube-proxy's Service frontends) and returns it as
// HNS stored it.
func (c *Client) CreateLoadBalancer(ctx context.Context, lb *hcn.HostComputeLoadBalancer) (*hcn.HostComputeLoadBalancer, error) {
	const op = "create load balancer"
	d := *lb
	d.SchemaVersion = hcn.V2
	settings, err := encode(op, d)
	if err != nil {
		return nil, err
	}
	return bounded(ctx, op, lb.Id, func() (*hcn.HostComputeLoadBalancer, error) {
		h, err := c.api.CreateLoadBalancer(computenetwork.GUID{}, settings)
		if err != nil {
			return nil, err
		}
		out := &hcn.HostComputeLoadBalancer{}
		if err := c.created(loadBalancerKind, uintptr(h), out); err != nil {
			return nil, c.undo(loadBalancerKind, out.Id, err)
		}
		return out, nil
	}, func(out *hcn.HostComputeLoadBalancer) { c.undo(loadBalancerKind, out.Id, nil) })
}

// GetLoadBalancer returns the load balancer with id.
func (c *Client) GetLoadBalancer(ctx context.Context, id string) (*hcn.HostComputeLoadBalancer, error) {
	out := &hcn.HostComputeLoadBalancer{}
	return out, c.get(ctx, loadBalancerKind, id, out)
}

// ListLoadBalancers returns the load balancers the filter matches (all with nil).
func (c *Client) ListLoadBalancers(ctx context.Context, f Filter) ([]hcn.HostComputeLoadBalancer, error) {
	return list[hcn.HostComputeLoadBalancer](ctx, c, loadBalancerKind, f)
}

// UpdateLoadBalancer replaces load balancer id's document with lb, as hnslib's
// HostComputeLoadBalancer.Update does (HcnModifyLoadBalancer with the whole document).
func (c *Client) UpdateLoadBalancer(ctx context.Context, id string, lb *hcn.HostComputeLoadBalancer) error {
	d := *lb
	d.SchemaVersion = hcn.V2
	return c.modify(ctx, loadBalancerKind, "modify load balancer", id, d)
}

// DeleteLoadBalancer deletes a load balancer.
func (c *Client) DeleteLoadBalancer(ctx context.Context, id string) error {
	return c.del(ctx, loadBalancerKind, id)
}
