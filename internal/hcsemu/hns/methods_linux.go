package hns

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of HNS (computenetwork.dll's functions and vmcompute.dll's HNSCall), served
// by a Service (objects.go, v1.go); the emulator's server composes its table from Methods.
// A failure's Result is the same ResultError document as HCS's: hcsshim only prints HCN's
// error record, and the HRESULT is what callers match.

// hnsCreate, hnsOpen, hnsQuery, hnsModify, hnsDelete and hnsEnumerate adapt the shapes of HNS
// methods to a dispatch.Method of h.
func hnsCreate(h *Service, create func(h *Service, ctx context.Context, a wire.HcnCreateArgs) (string, error)) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnCreateArgs) (dispatch.Answer, error) {
		id, err := create(h, ctx, a)
		return dispatch.Answer{Reply: wire.HcnObjectReply{ID: id}}, err
	})
}

func hnsOpen(h *Service, open func(*Service, context.Context, string) (string, error)) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnObjectArgs) (dispatch.Answer, error) {
		id, err := open(h, ctx, a.ID)
		return dispatch.Answer{Reply: wire.HcnObjectReply{ID: id}}, err
	})
}

func hnsQuery(h *Service, query func(*Service, context.Context, string, string) (string, error)) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnObjectArgs) (dispatch.Answer, error) {
		doc, err := query(h, ctx, a.ID, a.Document)
		return dispatch.Answer{Result: doc}, err
	})
}

func hnsModify(h *Service, modify func(*Service, context.Context, string, string) error) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnObjectArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, modify(h, ctx, a.ID, a.Document)
	})
}

func hnsDelete(h *Service, del func(*Service, context.Context, string) error) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnObjectArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, del(h, ctx, a.ID)
	})
}

func hnsEnumerate(h *Service, enum func(*Service, context.Context, string) (string, error)) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HcnEnumerateArgs) (dispatch.Answer, error) {
		doc, err := enum(h, ctx, a.Query)
		return dispatch.Answer{Result: doc}, err
	})
}

// Methods are the wire methods h serves, by wire name.
func Methods(h *Service) map[string]dispatch.Method {
	return map[string]dispatch.Method{
		wire.MethodHcnEnumerateNetworks: hnsEnumerate(h, (*Service).EnumerateNetworks),
		wire.MethodHcnCreateNetwork: hnsCreate(h, func(h *Service, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
			return h.CreateNetwork(ctx, a.ID, a.Settings)
		}),
		wire.MethodHcnOpenNetwork:            hnsOpen(h, (*Service).OpenNetwork),
		wire.MethodHcnModifyNetwork:          hnsModify(h, (*Service).ModifyNetwork),
		wire.MethodHcnQueryNetworkProperties: hnsQuery(h, (*Service).QueryNetwork),
		wire.MethodHcnDeleteNetwork:          hnsDelete(h, (*Service).DeleteNetwork),

		wire.MethodHcnEnumerateEndpoints: hnsEnumerate(h, (*Service).EnumerateEndpoints),
		wire.MethodHcnCreateEndpoint: hnsCreate(h, func(h *Service, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
			return h.CreateEndpoint(ctx, a.Network, a.ID, a.Settings)
		}),
		wire.MethodHcnOpenEndpoint:            hnsOpen(h, (*Service).OpenEndpoint),
		wire.MethodHcnModifyEndpoint:          hnsModify(h, (*Service).ModifyEndpoint),
		wire.MethodHcnQueryEndpointProperties: hnsQuery(h, (*Service).QueryEndpoint),
		wire.MethodHcnDeleteEndpoint:          hnsDelete(h, (*Service).DeleteEndpoint),

		wire.MethodHcnEnumerateNamespaces: hnsEnumerate(h, (*Service).EnumerateNamespaces),
		wire.MethodHcnCreateNamespace: hnsCreate(h, func(h *Service, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
			return h.CreateNamespace(ctx, a.ID, a.Settings)
		}),
		wire.MethodHcnOpenNamespace:            hnsOpen(h, (*Service).OpenNamespace),
		wire.MethodHcnModifyNamespace:          hnsModify(h, (*Service).ModifyNamespace),
		wire.MethodHcnQueryNamespaceProperties: hnsQuery(h, (*Service).QueryNamespace),
		wire.MethodHcnDeleteNamespace:          hnsDelete(h, (*Service).DeleteNamespace),

		wire.MethodHcnEnumerateLoadBalancers: hnsEnumerate(h, (*Service).EnumerateLoadBalancers),
		wire.MethodHcnCreateLoadBalancer: hnsCreate(h, func(h *Service, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
			return h.CreateLoadBalancer(ctx, a.ID, a.Settings)
		}),
		wire.MethodHcnOpenLoadBalancer:            hnsOpen(h, (*Service).OpenLoadBalancer),
		wire.MethodHcnModifyLoadBalancer:          hnsModify(h, (*Service).ModifyLoadBalancer),
		wire.MethodHcnQueryLoadBalancerProperties: hnsQuery(h, (*Service).QueryLoadBalancer),
		wire.MethodHcnDeleteLoadBalancer:          hnsDelete(h, (*Service).DeleteLoadBalancer),

		wire.MethodHNSCall: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.HNSCallArgs) (dispatch.Answer, error) {
			return dispatch.Answer{Result: h.HNSCall(ctx, a.Method, a.Path, a.Request)}, nil
		}),
	}
}
