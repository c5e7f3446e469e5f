// Package client holds the Linux builds' clients of the hcsemu daemon (internal/hcsemu).
//
// HCS is the computecore.API that internal/hcs uses off Windows: one unix-socket connection
// (internal/hcsemu/wire) per client, many concurrent calls, handles kept here as the
// computecore.dll keeps them on Windows, stdio received as file descriptors. NewHCS finds the
// daemon at $HCSEMU_ADDRESS or wire.DefaultAddress; DialHCS takes an address.
//
// It imports computecore (the API it implements) and wire, nothing above them; only
// internal/hcs, the emulator's tests and the e2e harness import it.
package client
