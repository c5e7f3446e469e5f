package hns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// Client is a typed HNS client.
type Client struct {
	api computenetwork.API
}

// NewClient returns a client of api.
func NewClient(api computenetwork.API) *Client { return &Client{api: api} }

// Error is a failed HNS call: the operation, the object it concerned, and the cause (a
// *computenetwork.Error with the HRESULT and HCN's record, or the context's end).
type Error struct {
	Op  string
	ID  string
	Err error
}

func (e *Error) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("hns %s %s: %v", e.Op, e.ID, e.Err)
	}
	return fmt.Sprintf("hns %s: %v", e.Op, e.Err)
}

func (e *Error) Unwrap() []error {
	errs := []error{e.Err}
	if k := e.kind(); k != nil {
		errs = append(errs, k)
	}
	return errs
}

// kind maps the HRESULT to an errdefs kind, once, here.
func (e *Error) kind() error {
	var hr computenetwork.HRESULT
	if !errors.As(e.Err, &hr) {
		return nil // a context's end is already context.Canceled or DeadlineExceeded
	}
	switch hr {
	case computenetwork.HCN_E_NETWORK_NOT_FOUND, computenetwork.HCN_E_ENDPOINT_NOT_FOUND, computenetwork.E_ELEMENT_NOT_FOUND,
		computenetwork.HCN_E_POLICY_NOT_FOUND, computenetwork.HCN_E_SUBNET_NOT_FOUND:
		return errdefs.ErrNotFound
	case computenetwork.HCN_E_NETWORK_ALREADY_EXISTS, computenetwork.HCN_E_PORT_ALREADY_EXISTS,
		computenetwork.HCN_E_ENDPOINT_ALREADY_ATTACHED, computenetwork.HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS,
		computenetwork.HCN_E_POLICY_ALREADY_EXISTS:
		return errdefs.ErrAlreadyExists
	case computenetwork.E_NOTIMPL, computenetwork.HCN_E_REQUEST_UNSUPPORTED:
		return errdefs.ErrNotImplemented
	case computenetwork.E_SERVICE_NOT_ACTIVE, computenetwork.HCN_E_MANAGER_STOPPED:
		return errdefs.ErrUnavailable
	case computenetwork.E_INVALIDARG, computenetwork.HCN_E_INVALID_JSON, computenetwork.HCN_E_INVALID_IP,
		computenetwork.HCN_E_ADDR_INVALID_OR_RESERVED, computenetwork.HCN_E_INVALID_NETWORK_TYPE,
		computenetwork.HCN_E_INVALID_POLICY, computenetwork.HCN_E_INVALID_POLICY_TYPE,
		computenetwork.HCN_E_INVALID_INTERNAL_PORT, computenetwork.HCN_E_GUID_CONVERSION_FAILURE:
		return errdefs.ErrInvalidArgument
	}
	return nil
}

// IsNotFound reports an unknown network, endpoint or namespace.
func IsNotFound(err error) bool { return errdefs.IsNotFound(err) }

// ctxError is the cause of a call that its context ended.
type ctxError struct {
	cause     error
	abandoned bool
}

func (e *ctxError) Error() string {
	if e.abandoned {
		return fmt.Sprintf("abandoned (the HCN call goes on; what it makes is removed): %v", e.cause)
	}
	return fmt.Sprintf("not started: %v", e.cause)
}

func (e *ctxError) Unwrap() error { return e.cause }

// bounded runs f in a goroutine and returns when it does or when ctx ends; then abandon (if not
// nil) gets f's result once it arrives, to undo it.
func bounded[T any](ctx context.Context, op, id string, f func() (T, error), abandon func(T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, &Error{Op: op, ID: id, Err: &ctxError{cause: context.Cause(ctx)}}
	}
	type res struct {
		v   T
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := f()
		done <- res{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return zero, &Error{Op: op, ID: id, Err: r.err}
		}
		return r.v, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil && abandon != nil {
				abandon(r.v)
			}
		}()
		return zero, &Error{Op: op, ID: id, Err: &ctxError{cause: context.Cause(ctx), abandoned: true}}
	}
}

func parseID(op, id string) (computenetwork.GUID, error) {
	g, err := computenetwork.ParseGUID(id)
	if err != nil {
		return g, &Error{Op: op, ID: id, Err: fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)}
	}
	return g, nil
}

func encode(op string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", &Error{Op: op, Err: fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)}
	}
	return string(b), nil
}

func decode(op, id, doc string, v any) error {
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return &Error{Op: op, ID: id, Err: fmt.Errorf("decode %.200q: %w", doc, err)}
	}
	return nil
}

// defaultQuery is what hcsshim's hcn package queries properties with.
func defaultQuery() string {
	b, _ := json.Marshal(hcn.HostComputeQuery{SchemaVersion: hcn.V2})
	return string(b)
}

// Filter is a HostComputeQuery filter: field → value ("ID", "Name", "VirtualNetwork", …).
type Filter map[string]any

func filterQuery(op string, f Filter) (string, error) {
	q := hcn.HostComputeQuery{SchemaVersion: hcn.V2}
	if len(f) > 0 {
		b, err := json.Marshal(f)
		if err != nil {
			return "", &Error{Op: op, Err: fmt.Errorf("%w: filter: %w", errdefs.ErrInvalidArgument, err)}
		}
		q.Filter = string(b)
	}
	return encode(op, q)
}

// enumerateIDs decodes an enumeration's array of GUIDs.
func enumerateIDs(op, doc string) ([]computenetwork.GUID, error) {
	var ids []string
	if err := decode(op, "", doc, &ids); err != nil {
		return nil, err
	}
	out := make([]computenetwork.GUID, 0, len(ids))
	for _, s := range ids {
		g, err := computenetwork.ParseGUID(s)
		if err != nil {
			return nil, &Error{Op: op, Err: fmt.Errorf("enumeration returned %w", err)}
		}
		out = append(out, g)
	}
	return out, nil
}

// Version is the service's version (HNSCall GET /globals/version), which hcsshim's hcn package
// reads to decide which features it may use.
func (c *Client) Version(ctx context.Context) (hcn.Version, error) {
	const op = "get version"
	resp, err := bounded(ctx, op, "", func() (string, error) { return c.api.HNSCall("GET", "/globals/version", "") }, nil)
	if err != nil {
		return hcn.Version{}, err
	}
	var r hcn.Response
	if err := decode(op, "", resp, &r); err != nil {
		return hcn.Version{}, err
	}
	if !r.Success {
		return hcn.Version{}, &Error{Op: op, Err: errors.New(r.Error)}
	}
	var v hcn.Version
	return v, decode(op, "", string(r.Output), &v)
}

// HNSCall makes a v1 call and returns its Output, or an error with the response's Error.
func (c *Client) HNSCall(ctx context.Context, method, path string, request any) (json.RawMessage, error) {
	op := method + " " + path
	body := ""
	if request != nil {
		var err error
		if body, err = encode(op, request); err != nil {
			return nil, err
		}
	}
	resp, err := bounded(ctx, op, "", func() (string, error) { return c.api.HNSCall(method, path, body) }, nil)
	if err != nil {
		return nil, err
	}
	var r hcn.Response
	if err := decode(op, "", resp, &r); err != nil {
		return nil, err
	}
	if !r.Success {
		return nil, &Error{Op: op, Err: errors.New(r.Error)}
	}
	return r.Output, nil
}
