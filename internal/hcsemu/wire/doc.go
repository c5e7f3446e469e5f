// Package wire is the protocol between the hcsemu daemon (internal/hcsemu) and its client (the
// non-Windows computecore.API in internal/computecore).
//
// It is a leaf package that imports nothing of this project's, not even internal/computecore
// (whose client file imports it, so the reverse would be a cycle): HRESULTs and event types are
// carried as their uint32 values of computecore.HRESULT and computecore.EventType.
//
// The transport is one unix stream socket per client process. Every message is a Frame: a 4-byte
// big-endian length, then that many bytes of JSON. A client sends requests ({id, method, args});
// the daemon answers each with a response carrying the same id, and in any order, because calls
// run concurrently. File descriptors that belong to a response (a process's stdio pipes, or the
// master of its pseudo console) travel with the frame's first bytes as SCM_RIGHTS ancillary
// data; Frame.FDs says how many, and the receiver takes them, in order, from the queue of
// descriptors received so far. The daemon also pushes unsolicited event frames (id 0, Event set)
// to the connections that hold a handle on the system or process concerned.
//
// Handles live on the client. On the wire a compute system is named by its id and its instance,
// a number the daemon gives each system it creates, so that a handle on a system that was
// removed never reaches a later system with the same id.
package wire
