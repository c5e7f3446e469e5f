// Package hcs is the typed client of the Host Compute Service that the rest of runhcs uses:
// compute systems (System) and the processes in them (Process), over internal/computecore.
//
// It adds what the C API leaves to its callers:
//
//   - Every call takes a context and is bounded by it. Each call creates an HCS operation, makes
//     the computecore call and waits for the operation's result in a goroutine; when the context
//     ends first, the operation is cancelled (HcsCancelOperation) and the call returns an *Error
//     naming the operation and the system id that wraps the context's error. The abandoned wait
//     finishes in the background and releases what it produced.
//   - Errors are *Error values carrying the HRESULT and the detail of the HCS result document;
//     errors.Is matches them against this package's sentinels (ErrNotFound, ErrInvalidState…),
//     against the computecore.HRESULT constants, and against containerd's errdefs kinds, so the
//     shim can return them over ttrpc as the right gRPC codes.
//   - Notifications become Go events: System.Exited and Process.Exited are channels closed when
//     HCS reports the exit (or when the service goes away).
//
// Calls go through a Client, which its user makes and passes on; the package keeps no API of
// its own. NewClient wraps a given computecore.API (a fake in unit tests, a connection of the
// test harness's, test/harness). NewHostClient makes this host's API lazily with newAPI, and
// this package is where the implementation is chosen: computecore.New (the computecore.dll
// bindings) on Windows, the hcsemu daemon's client (internal/hcsemu/client) elsewhere, so that
// internal/computecore stays the bare API surface. A System or Process keeps the Client it was
// opened with. The package imports computecore, schema2 and, off Windows, the emulator's client;
// nothing above them.
package hcs
