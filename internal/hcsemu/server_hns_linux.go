package hcsemu

import (
	"context"
	"encoding/json"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computenetwork"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// hnsHandler serves one HNS method: it decodes its args and returns the output document.
type hnsHandler func(ctx context.Context, h *hnsState, f *wire.Frame) (result string, reply any, err error)

func objectArgs(f *wire.Frame) (wire.HcnObjectArgs, error) {
	var a wire.HcnObjectArgs
	err := f.DecodeArgs(&a)
	return a, err
}

// hnsMethods are the HNS methods of the protocol (wire/hns.go), beside their wire names.
var hnsMethods = map[string]hnsHandler{
	wire.MethodHcnEnumerateNetworks: enumerate((*hnsState).EnumerateNetworks),
	wire.MethodHcnCreateNetwork: func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		var a wire.HcnCreateArgs
		if err := f.DecodeArgs(&a); err != nil {
			return "", nil, err
		}
		id, err := h.CreateNetwork(ctx, a.ID, a.Settings)
		return "", wire.HcnObjectReply{ID: id}, err
	},
	wire.MethodHcnOpenNetwork:            open((*hnsState).OpenNetwork),
	wire.MethodHcnModifyNetwork:          modify((*hnsState).ModifyNetwork),
	wire.MethodHcnQueryNetworkProperties: query((*hnsState).QueryNetwork),
	wire.MethodHcnDeleteNetwork:          del((*hnsState).DeleteNetwork),
	wire.MethodHcnEnumerateEndpoints:     enumerate((*hnsState).EnumerateEndpoints),
	wire.MethodHcnCreateEndpoint: func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		var a wire.HcnCreateArgs
		if err := f.DecodeArgs(&a); err != nil {
			return "", nil, err
		}
		id, err := h.CreateEndpoint(ctx, a.Network, a.ID, a.Settings)
		return "", wire.HcnObjectReply{ID: id}, err
	},
	wire.MethodHcnOpenEndpoint:            open((*hnsState).OpenEndpoint),
	wire.MethodHcnModifyEndpoint:          modify((*hnsState).ModifyEndpoint),
	wire.MethodHcnQueryEndpointProperties: query((*hnsState).QueryEndpoint),
	wire.MethodHcnDeleteEndpoint:          del((*hnsState).DeleteEndpoint),
	wire.MethodHcnEnumerateNamespaces:     enumerate((*hnsState).EnumerateNamespaces),
	wire.MethodHcnCreateNamespace: func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		var a wire.HcnCreateArgs
		if err := f.DecodeArgs(&a); err != nil {
			return "", nil, err
		}
		id, err := h.CreateNamespace(ctx, a.ID, a.Settings)
		return "", wire.HcnObjectReply{ID: id}, err
	},
	wire.MethodHcnOpenNamespace:            open((*hnsState).OpenNamespace),
	wire.MethodHcnModifyNamespace:          modify((*hnsState).ModifyNamespace),
	wire.MethodHcnQueryNamespaceProperties: query((*hnsState).QueryNamespace),
	wire.MethodHcnDeleteNamespace:          del((*hnsState).DeleteNamespace),
	wire.MethodHNSCall: func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		var a wire.HNSCallArgs
		if err := f.DecodeArgs(&a); err != nil {
			return "", nil, err
		}
		return h.HNSCall(ctx, a.Method, a.Path, a.Request), nil, nil
	},
}

func enumerate(fn func(*hnsState, context.Context, string) (string, error)) hnsHandler {
	return func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		var a wire.HcnEnumerateArgs
		if err := f.DecodeArgs(&a); err != nil {
			return "", nil, err
		}
		r, err := fn(h, ctx, a.Query)
		return r, nil, err
	}
}

func open(fn func(*hnsState, context.Context, string) (string, error)) hnsHandler {
	return func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		a, err := objectArgs(f)
		if err != nil {
			return "", nil, err
		}
		id, err := fn(h, ctx, a.ID)
		return "", wire.HcnObjectReply{ID: id}, err
	}
}

func modify(fn func(*hnsState, context.Context, string, string) error) hnsHandler {
	return func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		a, err := objectArgs(f)
		if err != nil {
			return "", nil, err
		}
		return "", nil, fn(h, ctx, a.ID, a.Document)
	}
}

func query(fn func(*hnsState, context.Context, string, string) (string, error)) hnsHandler {
	return func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		a, err := objectArgs(f)
		if err != nil {
			return "", nil, err
		}
		r, err := fn(h, ctx, a.ID, a.Document)
		return r, nil, err
	}
}

func del(fn func(*hnsState, context.Context, string) error) hnsHandler {
	return func(ctx context.Context, h *hnsState, f *wire.Frame) (string, any, error) {
		a, err := objectArgs(f)
		if err != nil {
			return "", nil, err
		}
		return "", nil, fn(h, ctx, a.ID)
	}
}

// handleHNS serves f if it is an HNS method. A failure carries HCN's error record as Result.
func (s *Server) handleHNS(ctx context.Context, f *wire.Frame) (*wire.Frame, bool) {
	fn, ok := hnsMethods[f.Method]
	if !ok {
		return nil, false
	}
	out := &wire.Frame{ID: f.ID}
	result, reply, err := fn(ctx, s.e.hns, f)
	if err != nil {
		he := AsError(err)
		if isProtocolError(err) {
			he = hcnErrorf(computenetwork.HCN_E_INVALID_JSON, "%v", err) // args this server cannot read
		}
		log.G(ctx).WithError(err).Debug("hcsemu: HNS request failed")
		b, _ := json.Marshal(hcn.ErrorRecord{Success: false, Error: he.Message, ErrorCode: uint32(he.HResult)})
		out.HResult, out.Result = uint32(he.HResult), string(b)
		return out, true
	}
	out.Result = result
	if reply != nil {
		b, _ := json.Marshal(reply)
		out.Reply = b
	}
	return out, true
}
