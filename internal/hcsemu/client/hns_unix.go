//go:build unix

package client

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// NewHNS returns an HNS client of the daemon at $HCSEMU_ADDRESS, or at wire.DefaultAddress.
func NewHNS() (*HNSClient, error) {
	addr := os.Getenv(wire.AddressEnv)
	if addr == "" {
		addr = wire.DefaultAddress
	}
	return DialHNS(addr)
}

// HNSClient is the computenetwork.API of the hcsemu daemon: one connection, concurrent calls.
// Handles are keys of a table that remembers the GUID of the object each one was opened on;
// HCN handles carry no state in the service beyond that. When the connection drops, every
// call fails with ERROR_SERVICE_NOT_ACTIVE.
type HNSClient struct {
	conn  *wire.Conn
	reqID atomic.Uint64

	mu      sync.Mutex
	gone    bool
	pending map[uint64]chan *wire.Frame
	next    uintptr
	handles map[uintptr]handle
}

type handle struct {
	kind string // "network", "endpoint", "namespace", "load balancer"
	id   string
}

var _ computenetwork.API = (*HNSClient)(nil)

// DialHNS connects to the daemon at addr.
func DialHNS(addr string) (*HNSClient, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the HNS emulator (hcsemu) is not running at %s: %w: %w", addr, computenetwork.E_SERVICE_NOT_ACTIVE, err)
	}
	c := &HNSClient{conn: wire.NewConn(uc), pending: map[uint64]chan *wire.Frame{}, handles: map[uintptr]handle{}}
	go c.readLoop()
	return c, nil
}

// Close drops the connection; calls under way fail.
func (c *HNSClient) Close() error { return c.conn.Close() }

func (c *HNSClient) readLoop() {
	for {
		f, fds, err := c.conn.Receive()
		for _, fd := range fds {
			syscall.Close(fd)
		}
		if err != nil {
			break
		}
		if f.Event != nil {
			continue
		}
		c.mu.Lock()
		ch, ok := c.pending[f.ID]
		delete(c.pending, f.ID)
		c.mu.Unlock()
		if ok {
			ch <- f
		}
	}
	c.mu.Lock()
	c.gone = true
	for id, ch := range c.pending {
		delete(c.pending, id)
		ch <- nil
	}
	c.mu.Unlock()
}

// call sends a request and waits for its response; a failure is a *computenetwork.Error.
func (c *HNSClient) call(op, method string, args any) (*wire.Frame, error) {
	id := c.reqID.Add(1)
	f, err := wire.NewRequest(id, method, args)
	if err != nil {
		return nil, &computenetwork.Error{Op: op, HResult: computenetwork.E_INVALIDARG, Result: err.Error()}
	}
	ch := make(chan *wire.Frame, 1)
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return nil, &computenetwork.Error{Op: op, HResult: computenetwork.E_SERVICE_NOT_ACTIVE, Result: "the connection to hcsemu is closed"}
	}
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.conn.Send(f); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, &computenetwork.Error{Op: op, HResult: computenetwork.E_SERVICE_NOT_ACTIVE, Result: err.Error()}
	}
	r := <-ch
	if r == nil {
		return nil, &computenetwork.Error{Op: op, HResult: computenetwork.E_SERVICE_NOT_ACTIVE, Result: "hcsemu closed the connection"}
	}
	if r.HResult != 0 {
		return r, &computenetwork.Error{Op: op, HResult: computenetwork.HRESULT(r.HResult), Result: r.Result}
	}
	return r, nil
}

func (c *HNSClient) newHandle(kind, id string) uintptr {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.handles[c.next] = handle{kind: kind, id: id}
	return c.next
}

func (c *HNSClient) lookup(op, kind string, h uintptr) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hd, ok := c.handles[h]
	if !ok || hd.kind != kind {
		return "", &computenetwork.Error{Op: op, HResult: computenetwork.E_HANDLE, Result: fmt.Sprintf("%#x is not an open %s handle", h, kind)}
	}
	return hd.id, nil
}

func (c *HNSClient) closeHandle(op, kind string, h uintptr) error {
	if _, err := c.lookup(op, kind, h); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.handles, h)
	c.mu.Unlock()
	return nil
}

func guidArg(id computenetwork.GUID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

func (c *HNSClient) enumerate(op, method, query string) (string, error) {
	r, err := c.call(op, method, wire.HcnEnumerateArgs{Query: query})
	if err != nil {
		return "", err
	}
	return r.Result, nil
}

func (c *HNSClient) create(op, method, kind string, network string, id computenetwork.GUID, settings string) (uintptr, error) {
	r, err := c.call(op, method, wire.HcnCreateArgs{ID: guidArg(id), Network: network, Settings: settings})
	if err != nil {
		return 0, err
	}
	var rep wire.HcnObjectReply
	if err := r.DecodeReply(&rep); err != nil {
		return 0, &computenetwork.Error{Op: op, HResult: computenetwork.E_FAIL, Result: err.Error()}
	}
	return c.newHandle(kind, rep.ID), nil
}

func (c *HNSClient) open(op, method, kind string, id computenetwork.GUID) (uintptr, error) {
	r, err := c.call(op, method, wire.HcnObjectArgs{ID: id.String()})
	if err != nil {
		return 0, err
	}
	var rep wire.HcnObjectReply
	if err := r.DecodeReply(&rep); err != nil {
		return 0, &computenetwork.Error{Op: op, HResult: computenetwork.E_FAIL, Result: err.Error()}
	}
	return c.newHandle(kind, rep.ID), nil
}

func (c *HNSClient) onHandle(op, method, kind string, h uintptr, doc string) (string, error) {
	id, err := c.lookup(op, kind, h)
	if err != nil {
		return "", err
	}
	r, err := c.call(op, method, wire.HcnObjectArgs{ID: id, Document: doc})
	if err != nil {
		return "", err
	}
	return r.Result, nil
}

func (c *HNSClient) del(op, method string, id computenetwork.GUID) error {
	_, err := c.call(op, method, wire.HcnObjectArgs{ID: id.String()})
	return err
}

func (c *HNSClient) EnumerateNetworks(query string) (string, error) {
	return c.enumerate("HcnEnumerateNetworks", wire.MethodHcnEnumerateNetworks, query)
}

func (c *HNSClient) CreateNetwork(id computenetwork.GUID, settings string) (computenetwork.Network, error) {
	h, err := c.create("HcnCreateNetwork", wire.MethodHcnCreateNetwork, "network", "", id, settings)
	return computenetwork.Network(h), err
}

func (c *HNSClient) OpenNetwork(id computenetwork.GUID) (computenetwork.Network, error) {
	h, err := c.open("HcnOpenNetwork", wire.MethodHcnOpenNetwork, "network", id)
	return computenetwork.Network(h), err
}

func (c *HNSClient) ModifyNetwork(n computenetwork.Network, settings string) error {
	_, err := c.onHandle("HcnModifyNetwork", wire.MethodHcnModifyNetwork, "network", uintptr(n), settings)
	return err
}

func (c *HNSClient) QueryNetworkProperties(n computenetwork.Network, query string) (string, error) {
	return c.onHandle("HcnQueryNetworkProperties", wire.MethodHcnQueryNetworkProperties, "network", uintptr(n), query)
}

func (c *HNSClient) DeleteNetwork(id computenetwork.GUID) error {
	return c.del("HcnDeleteNetwork", wire.MethodHcnDeleteNetwork, id)
}

func (c *HNSClient) CloseNetwork(n computenetwork.Network) error {
	return c.closeHandle("HcnCloseNetwork", "network", uintptr(n))
}

func (c *HNSClient) EnumerateEndpoints(query string) (string, error) {
	return c.enumerate("HcnEnumerateEndpoints", wire.MethodHcnEnumerateEndpoints, query)
}

func (c *HNSClient) CreateEndpoint(n computenetwork.Network, id computenetwork.GUID, settings string) (computenetwork.Endpoint, error) {
	netID, err := c.lookup("HcnCreateEndpoint", "network", uintptr(n))
	if err != nil {
		return 0, err
	}
	h, err := c.create("HcnCreateEndpoint", wire.MethodHcnCreateEndpoint, "endpoint", netID, id, settings)
	return computenetwork.Endpoint(h), err
}

func (c *HNSClient) OpenEndpoint(id computenetwork.GUID) (computenetwork.Endpoint, error) {
	h, err := c.open("HcnOpenEndpoint", wire.MethodHcnOpenEndpoint, "endpoint", id)
	return computenetwork.Endpoint(h), err
}

func (c *HNSClient) ModifyEndpoint(e computenetwork.Endpoint, settings string) error {
	_, err := c.onHandle("HcnModifyEndpoint", wire.MethodHcnModifyEndpoint, "endpoint", uintptr(e), settings)
	return err
}

func (c *HNSClient) QueryEndpointProperties(e computenetwork.Endpoint, query string) (string, error) {
	return c.onHandle("HcnQueryEndpointProperties", wire.MethodHcnQueryEndpointProperties, "endpoint", uintptr(e), query)
}

func (c *HNSClient) DeleteEndpoint(id computenetwork.GUID) error {
	return c.del("HcnDeleteEndpoint", wire.MethodHcnDeleteEndpoint, id)
}

func (c *HNSClient) CloseEndpoint(e computenetwork.Endpoint) error {
	return c.closeHandle("HcnCloseEndpoint", "endpoint", uintptr(e))
}

func (c *HNSClient) EnumerateNamespaces(query string) (string, error) {
	return c.enumerate("HcnEnumerateNamespaces", wire.MethodHcnEnumerateNamespaces, query)
}

func (c *HNSClient) CreateNamespace(id computenetwork.GUID, settings string) (computenetwork.Namespace, error) {
	h, err := c.create("HcnCreateNamespace", wire.MethodHcnCreateNamespace, "namespace", "", id, settings)
	return computenetwork.Namespace(h), err
}

func (c *HNSClient) OpenNamespace(id computenetwork.GUID) (computenetwork.Namespace, error) {
	h, err := c.open("HcnOpenNamespace", wire.MethodHcnOpenNamespace, "namespace", id)
	return computenetwork.Namespace(h), err
}

func (c *HNSClient) ModifyNamespace(ns computenetwork.Namespace, settings string) error {
	_, err := c.onHandle("HcnModifyNamespace", wire.MethodHcnModifyNamespace, "namespace", uintptr(ns), settings)
	return err
}

func (c *HNSClient) QueryNamespaceProperties(ns computenetwork.Namespace, query string) (string, error) {
	return c.onHandle("HcnQueryNamespaceProperties", wire.MethodHcnQueryNamespaceProperties, "namespace", uintptr(ns), query)
}

func (c *HNSClient) DeleteNamespace(id computenetwork.GUID) error {
	return c.del("HcnDeleteNamespace", wire.MethodHcnDeleteNamespace, id)
}

func (c *HNSClient) CloseNamespace(ns computenetwork.Namespace) error {
	return c.closeHandle("HcnCloseNamespace", "namespace", uintptr(ns))
}

func (c *HNSClient) EnumerateLoadBalancers(query string) (string, error) {
	return c.enumerate("HcnEnumerateLoadBalancers", wire.MethodHcnEnumerateLoadBalancers, query)
}

func (c *HNSClient) CreateLoadBalancer(id computenetwork.GUID, settings string) (computenetwork.LoadBalancer, error) {
	h, err := c.create("HcnCreateLoadBalancer", wire.MethodHcnCreateLoadBalancer, "load balancer", "", id, settings)
	return computenetwork.LoadBalancer(h), err
}

func (c *HNSClient) OpenLoadBalancer(id computenetwork.GUID) (computenetwork.LoadBalancer, error) {
	h, err := c.open("HcnOpenLoadBalancer", wire.MethodHcnOpenLoadBalancer, "load balancer", id)
	return computenetwork.LoadBalancer(h), err
}

func (c *HNSClient) ModifyLoadBalancer(lb computenetwork.LoadBalancer, settings string) error {
	_, err := c.onHandle("HcnModifyLoadBalancer", wire.MethodHcnModifyLoadBalancer, "load balancer", uintptr(lb), settings)
	return err
}

func (c *HNSClient) QueryLoadBalancerProperties(lb computenetwork.LoadBalancer, query string) (string, error) {
	return c.onHandle("HcnQueryLoadBalancerProperties", wire.MethodHcnQueryLoadBalancerProperties, "load balancer", uintptr(lb), query)
}

func (c *HNSClient) DeleteLoadBalancer(id computenetwork.GUID) error {
	return c.del("HcnDeleteLoadBalancer", wire.MethodHcnDeleteLoadBalancer, id)
}

func (c *HNSClient) CloseLoadBalancer(lb computenetwork.LoadBalancer) error {
	return c.closeHandle("HcnCloseLoadBalancer", "load balancer", uintptr(lb))
}

func (c *HNSClient) HNSCall(method, path, request string) (string, error) {
	r, err := c.call("HNSCall "+method+" "+path, wire.MethodHNSCall, wire.HNSCallArgs{Method: method, Path: path, Request: request})
	if err != nil {
		return "", err
	}
	// The response is HNS's {"Success", "Error", "Output"}: returned as it is, as the DLL does.
	var probe json.RawMessage
	if json.Unmarshal([]byte(r.Result), &probe) != nil {
		return "", &computenetwork.Error{Op: "HNSCall", HResult: computenetwork.E_FAIL, Result: "malformed response: " + r.Result}
	}
	return r.Result, nil
}
