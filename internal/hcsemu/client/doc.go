// Package client holds the Linux builds' clients of the hcsemu daemon (internal/hcsemu).
//
// HCS is the computecore.API that internal/hcs uses off Windows: one unix-socket connection
// (internal/hcsemu/wire) per client, many concurrent calls, handles kept here as the
// computecore.dll keeps them on Windows, stdio received as file descriptors. NewHCS finds the
// daemon at $HCSEMU_ADDRESS or wire.DefaultAddress; DialHCS takes an address.
//
// HNSClient (hns_unix.go) is the computenetwork.API that internal/hns uses off Windows: the
// daemon's HNS over a connection of its own; NewHNS and DialHNS find it the same way.
//
// It imports computecore and computenetwork (the APIs it implements), internal/hcs/schema2 and
// wire, nothing above them; only internal/hcs, internal/hns, cmd/hcsemu (its fault command), the
// emulator's tests and the test harnesses (test/harness, test/winnode) import it.
package client
