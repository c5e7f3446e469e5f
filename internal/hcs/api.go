package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
)

// Client is a user of the Host Compute Service through one source of computecore.API. It is
// safe for concurrent use; Systems and Processes keep the Client (and the API) they were
// opened with. There is no package-level API: the shim makes one Client at start-up, and tests
// and the test harness (test/harness) make their own.
type Client struct {
	// newAPI makes the API on first use, and again after a disconnection; nil for a Client
	// of a fixed API (NewClient).
	newAPI func() (computecore.API, error)

	mu  sync.Mutex
	cur computecore.API
}

// NewClient returns a Client that makes every call through api (a fake in unit tests, a
// connection of its own in the test harness). It never replaces api.
func NewClient(api computecore.API) *Client { return &Client{cur: api} }

// NewHostClient returns a Client of this host's HCS: computecore.dll on Windows, the hcsemu
// daemon elsewhere (newAPI). The API is made on first use, and a failed attempt is not
// remembered, so a call made after the emulator daemon was started succeeds; an API that
// reported the service disconnected is dropped, so that the next call reconnects, for instance
// to a restarted daemon.
func NewHostClient() *Client { return &Client{newAPI: newAPI} }

// drop forgets api if it is the current one and this Client made it, after it reported the
// service disconnected (the emulator client stays disconnected). Open handles keep their API.
func (c *Client) drop(api computecore.API) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newAPI != nil && c.cur == api {
		c.cur = nil
	}
}

// dropIfDisconnected is drop for the calls that do not go through call (OpenComputeSystem,
// OpenProcess, GetServiceProperties): a client that connected while the daemon was dying (the
// listener still accepted, then reset) would otherwise stay the current API for good, and
// every later open would fail with HCS_E_SERVICE_DISCONNECT (seen in test/e2e TestFaults,
// "hcsemu restarted").
func (c *Client) dropIfDisconnected(api computecore.API, err error) {
	if errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		c.drop(api)
	}
}

func (c *Client) api() (computecore.API, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur, nil
	}
	if c.newAPI == nil {
		return nil, errors.New("no computecore API") // NewClient(nil)
	}
	api, err := c.newAPI()
	if err != nil {
		return nil, err
	}
	c.cur = api
	return api, nil
}

// apiFor returns the API, or an *Error for op/id when it cannot be had.
func (c *Client) apiFor(op, id string) (computecore.API, error) {
	api, err := c.api()
	if err != nil {
		return nil, &Error{Op: op, ID: id, Err: fmt.Errorf("%w: %w", ErrServiceDisconnected, err)}
	}
	return api, nil
}

// call describes one operation-based computecore call.
type call struct {
	client *Client // told when api reports the service disconnected
	api    computecore.API
	op     string // Error.Op
	id     string
	pid    uint32
	// withInfo waits with WaitForOperationResultAndProcessInfo (CreateProcess).
	withInfo bool
	// start makes the computecore call with the operation.
	start func(op computecore.Operation) error
	// abandon releases what a call produced when its caller is gone (its context ended): it is
	// given the operation's outcome once the operation completes. It may be nil.
	abandon func(info computecore.ProcessInformation, err error)
}

type result struct {
	doc  string
	info computecore.ProcessInformation
	err  error
}

// run makes the call bounded by ctx and returns the operation's result document (and process
// information with withInfo). See the package documentation for the cancellation contract.
func (c *call) run(ctx context.Context) (string, computecore.ProcessInformation, error) {
	var none computecore.ProcessInformation
	if err := ctx.Err(); err != nil {
		return "", none, c.fail(&ctxError{cause: context.Cause(ctx), notStarted: true}, "")
	}
	op, err := c.api.CreateOperation(0, nil)
	if err != nil {
		return "", none, c.fail(err, "")
	}
	if err := c.start(op); err != nil {
		// The call was refused synchronously; HCS may still have put a document on the operation.
		doc, _ := c.api.GetOperationResult(op)
		c.api.CloseOperation(op)
		return "", none, c.fail(err, resultDetail(doc))
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if c.withInfo {
			r.info, r.doc, r.err = c.api.WaitForOperationResultAndProcessInfo(op, computecore.Infinite)
		} else {
			r.doc, r.err = c.api.WaitForOperationResult(op, computecore.Infinite)
		}
		done <- r
	}()
	select {
	case r := <-done:
		c.api.CloseOperation(op)
		if r.err != nil {
			return "", none, c.fail(r.err, resultDetail(r.doc))
		}
		return r.doc, r.info, nil
	case <-ctx.Done():
		opID := c.api.GetOperationId(op)
		cerr := c.api.CancelOperation(op)
		log.G(ctx).WithFields(log.Fields{"system": c.id, "op": c.op, "operation": opID}).
			WithError(context.Cause(ctx)).Warn("HCS call abandoned; operation cancelled")
		go func() {
			// Keep the operation open until its wait returns, then release it and anything the
			// call produced that nobody will take now.
			r := <-done
			c.api.CloseOperation(op)
			if c.abandon != nil {
				c.abandon(r.info, r.err)
			}
		}()
		return "", none, c.fail(&ctxError{cause: context.Cause(ctx), cancelled: cerr, opID: opID}, "")
	}
}

func (c *call) fail(err error, detail string) error {
	if errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		c.client.drop(c.api)
	}
	return &Error{Op: c.op, ID: c.id, Pid: c.pid, Err: err, Detail: detail}
}

// unmarshal decodes a result document into v, or returns an *Error naming the call.
func (c *call) unmarshal(doc string, v any) error {
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return c.fail(fmt.Errorf("decode result document %.200q: %w", doc, err), "")
	}
	return nil
}

// marshal encodes a document argument; documents given as string or []byte pass as they are.
func marshal(v any) (string, error) {
	switch d := v.(type) {
	case nil:
		return "", nil
	case string:
		return d, nil
	case []byte:
		return string(d), nil
	case json.RawMessage:
		return string(d), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// bounded runs f (a computecore call that takes no operation, such as GetServiceProperties or
// OpenComputeSystem) in a goroutine and returns when it does or when ctx ends. On ctx's end,
// abandon (if not nil) is given f's result when it arrives.
func bounded[T any](ctx context.Context, op, id string, f func() (T, error), abandon func(T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, &Error{Op: op, ID: id, Err: &ctxError{cause: context.Cause(ctx), notStarted: true}}
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
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil && abandon != nil {
				abandon(r.v)
			}
		}()
		return zero, &Error{Op: op, ID: id, Err: &ctxError{cause: context.Cause(ctx), abandoned: true}}
	}
}
