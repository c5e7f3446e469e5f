// Package server serves an emulated Windows host's services to its clients, one connection per
// client process: on a unix socket (unix_linux.go), where a process's stdio travels as file
// descriptors, and on loopback TCP (tcp_linux.go) for the stand-in DLLs under Wine, where stdio
// and mapped pipes travel over connections named by a token. Every connection passes the gate
// (gate_linux.go) before anything it sends is served; listen.go checks the addresses.
//
// What it serves arrives as the Engine interface (server_linux.go): the wire methods, the fault
// injector's hooks, and what a connection's end and drive mapping mean to the engine
// (internal/hcsemu/compute's Engine meets it). So it imports no service, and a service's tests
// can run it. It imports the protocol (internal/hcsemu/wire), internal/hcsemu/dispatch and
// internal/hcsemu/hresult, internal/computecore for HRESULTs, and internal/atomicfile for the
// TCP key file.
package server
