// Package wire is the protocol between the hcsemu daemon (internal/hcsemu) and its client
// (internal/hcsemu/client), and the daemon's default address.
//
// It is the neutral leaf both sides import. Of this project's packages it imports only
// internal/computecore, the bare HCS API surface, for the typed HRESULT and event type the
// frames carry, and internal/hcs/schema2 for the ResultError document of a failure; neither
// imports anything of the project's.
//
// hns.go holds the HNS half: one method per computenetwork.dll function and one for
// vmcompute.dll's HNSCall, synchronous, with objects named by GUID on the wire and handles kept
// by the client (internal/hcsemu/client's HNSClient).
//
// fault.go holds the fault control methods (stall, release, fail, crash, disconnect, delay,
// list, clear; `hcsemu fault`), for tests and the machine's operator. They are served on the
// unix socket only: the TCP transport answers each with E_ACCESSDENIED, so that neither the
// Wine stand-ins nor anyone holding the TCP key can stall, fail or crash anything.
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
// A second transport, loopback TCP (hcsemu --tcp-address), serves clients that cannot receive
// descriptors: the stand-in computecore.dll and vmcompute.dll that Windows programs load under
// Wine (hack/wine/computecore, hack/wine/vmcompute; the latter sends only the storage filter's
// methods of storage.go, which carry no descriptors). Its frames are the same, with FDs always
// 0 (WriteFrame, ReadFrame).
//
// Every TCP connection, control and stdio alike, starts with authentication (auth.go), since
// any user of the machine can open a loopback port: the client's first frame is
// {"id":1,"method":"Authenticate","args":{"key":K}}, K being the content of the daemon's key
// file (hcsemu --tcp-key-file: 32 random bytes in hex, new at every start, mode 0600; clients
// find it through $HCSEMU_TCP_KEY_FILE), at most MaxAuthenticateFrame bytes, within 10 s of
// the connect. The daemon compares K in constant time and answers a right one {"id":1}
// (the request's id, nothing else); anything else, a wrong key, another method or silence,
// gets the connection closed without a byte, and a warning in the daemon's log naming the
// peer and the reason. The unix socket needs no key: only the daemon's uid may connect.
//
// After the key, the connection's next frame decides what it is. A reply whose process has
// stdio carries ProcessReply.StdioToken, an unguessable single-use string, instead of
// descriptors, and the client opens one more connection per stream whose only frame after the
// key is MethodAttachStdio with AttachStdioArgs{token, slot}; the connection then carries that
// stream's raw bytes: stdin from the client (its half-close is the end of the process's input;
// the daemon closes the connection once all of it is written to the process's side), stdout
// and stderr to it (the daemon closes the connection at the stream's end of file). With a
// console, slots 0 and 1 are both the pseudo console master. Streams not attached within 30 s
// are closed; an unknown, used or expired token attaches nothing. A host named pipe mapped into
// a process-isolated container (Container.MappedPipes) lives on the client's Windows side, so
// the daemon cannot open it: when a process of the container connects to it, the daemon sends
// the client an Event with a PipeConnect{hostPath, token}, and the client opens the host pipe
// and one more connection whose only frame after the key is MethodAttachPipe with
// AttachPipeArgs{token, error}; the connection then carries the bytes both ways (same 30 s
// limit). The whole protocol, as the DLL uses it, is in hack/wine/README.md.
//
// Handles live on the client. On the wire a compute system is named by its id and its instance,
// a number the daemon gives each system it creates, so that a handle on a system that was
// removed never reaches a later system with the same id.
package wire
