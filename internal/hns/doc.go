// Package hns is the typed client of the Host Network Service: networks, endpoints,
// namespaces and load balancers with the HCN v2 documents (internal/hns/hcn), over the bare
// API of internal/computenetwork, as internal/hcs is for HCS.
//
// A Client is made with NewClient from an injected computenetwork.API (DefaultAPI picks
// computenetwork.dll on Windows and the hcsemu daemon's client elsewhere); there are no package
// globals. Every call is bounded by its context: HCN calls are synchronous and cannot be
// cancelled, so a call whose context ends returns at once with an *Error wrapping the context's
// cause, and what it still produces is cleaned up when it completes (a network, endpoint,
// namespace or load balancer created by an abandoned create is deleted). No lock is held
// across an HCN call.
//
// Errors are *Error values that name the operation and the object and map to errdefs kinds
// (NotFound, AlreadyExists, InvalidArgument, NotImplemented), with the HRESULT reachable via
// errors.Is.
package hns
