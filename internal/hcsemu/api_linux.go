package hcsemu

import (
	"github.com/openhcs/runhcs/internal/hcsemu/compute"
	"github.com/openhcs/runhcs/internal/hcsemu/server"
)

// The emulator's surface for the programs that run it (cmd/hcsemu, test/winnode, the suites):
// each name is its package's, so that they import one package and the cut below stays free to
// move.

// Config configures the daemon's compute engine (compute.Config).
type Config = compute.Config

// Addresses are where the daemon serves (server.Addresses).
type Addresses = server.Addresses

// DefaultOSVersion is the default emulated host build (compute.DefaultOSVersion).
const DefaultOSVersion = compute.DefaultOSVersion

// Reexec runs the helper this program was re-executed as by an engine, if it was
// (compute.Reexec); a program that runs the daemon calls it first.
func Reexec() (code int, ok bool) { return compute.Reexec() }

// CCGServiceID is the HvSocket service GUID of a Container Credential Guard instance
// (compute.CCGServiceID).
func CCGServiceID(instanceID string) string { return compute.CCGServiceID(instanceID) }
