package hcsemu

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of HNS (computenetwork.dll's functions and vmcompute.dll's HNSCall), served
// by the Engine's hnsState (hns.go, hns_v1.go). See dispatch_linux.go for the table they join.
// A failure's Result is the same ResultError document as HCS's: hcsshim only prints HCN's
// error record, and the HRESULT is what callers match.

func init() { addMethods(hnsMethods) }

// hnsCreate, hnsObject and hnsEnumerate adapt the three shapes of HNS methods.
func hnsCreate(create func(h *hnsState, ctx context.Context, a wire.HcnCreateArgs) (string, error)) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnCreateArgs) (answer, error) {
		id, err := create(e.hns, ctx, a)
		return answer{reply: wire.HcnObjectReply{ID: id}}, err
	})
}

func hnsOpen(open func(*hnsState, context.Context, string) (string, error)) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnObjectArgs) (answer, error) {
		id, err := open(e.hns, ctx, a.ID)
		return answer{reply: wire.HcnObjectReply{ID: id}}, err
	})
}

func hnsQuery(query func(*hnsState, context.Context, string, string) (string, error)) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnObjectArgs) (answer, error) {
		doc, err := query(e.hns, ctx, a.ID, a.Document)
		return answer{result: doc}, err
	})
}

func hnsModify(modify func(*hnsState, context.Context, string, string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnObjectArgs) (answer, error) {
		return answer{}, modify(e.hns, ctx, a.ID, a.Document)
	})
}

func hnsDelete(del func(*hnsState, context.Context, string) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnObjectArgs) (answer, error) {
		return answer{}, del(e.hns, ctx, a.ID)
	})
}

func hnsEnumerate(enum func(*hnsState, context.Context, string) (string, error)) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HcnEnumerateArgs) (answer, error) {
		doc, err := enum(e.hns, ctx, a.Query)
		return answer{result: doc}, err
	})
}

var hnsMethods = map[string]method{
	wire.MethodHcnEnumerateNetworks: hnsEnumerate((*hnsState).EnumerateNetworks),
	wire.MethodHcnCreateNetwork: hnsCreate(func(h *hnsState, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
		return h.CreateNetwork(ctx, a.ID, a.Settings)
	}),
	wire.MethodHcnOpenNetwork:            hnsOpen((*hnsState).OpenNetwork),
	wire.MethodHcnModifyNetwork:          hnsModify((*hnsState).ModifyNetwork),
	wire.MethodHcnQueryNetworkProperties: hnsQuery((*hnsState).QueryNetwork),
	wire.MethodHcnDeleteNetwork:          hnsDelete((*hnsState).DeleteNetwork),

	wire.MethodHcnEnumerateEndpoints: hnsEnumerate((*hnsState).EnumerateEndpoints),
	wire.MethodHcnCreateEndpoint: hnsCreate(func(h *hnsState, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
		return h.CreateEndpoint(ctx, a.Network, a.ID, a.Settings)
	}),
	wire.MethodHcnOpenEndpoint:            hnsOpen((*hnsState).OpenEndpoint),
	wire.MethodHcnModifyEndpoint:          hnsModify((*hnsState).ModifyEndpoint),
	wire.MethodHcnQueryEndpointProperties: hnsQuery((*hnsState).QueryEndpoint),
	wire.MethodHcnDeleteEndpoint:          hnsDelete((*hnsState).DeleteEndpoint),

	wire.MethodHcnEnumerateNamespaces: hnsEnumerate((*hnsState).EnumerateNamespaces),
	wire.MethodHcnCreateNamespace: hnsCreate(func(h *hnsState, ctx context.Context, a wire.HcnCreateArgs) (string, error) {
		return h.CreateNamespace(ctx, a.ID, a.Settings)
	}),
	wire.MethodHcnOpenNamespace:            hnsOpen((*hnsState).OpenNamespace),
	wire.MethodHcnModifyNamespace:          hnsModify((*hnsState).ModifyNamespace),
	wire.MethodHcnQueryNamespaceProperties: hnsQuery((*hnsState).QueryNamespace),
	wire.MethodHcnDeleteNamespace:          hnsDelete((*hnsState).DeleteNamespace),

	wire.MethodHNSCall: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.HNSCallArgs) (answer, error) {
		return answer{result: e.hns.HNSCall(ctx, a.Method, a.Path, a.Request)}, nil
	}),
}
