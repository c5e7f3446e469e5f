package compute

import (
	"fmt"
	"os"
	"sync/atomic"
)

// The engine starts two helpers by re-executing the binary it runs in (/proc/self/exe) with an
// environment variable set: a process-isolated container's silo init (siloInitEnv,
// silo_linux.go) and a utility VM's init (vmInitEnv, vminit_linux.go). Such a process must
// become that helper before anything else runs, which is the caller's explicit choice: a binary
// that runs an Engine calls Reexec first, in main (cmd/hcsemu) or TestMain. Importing this
// package has no side effect.

// reexecCalled records that the binary called Reexec, which NewEngine requires: an engine in
// a binary that does not would re-execute it as a helper that runs the binary's main instead.
var reexecCalled atomic.Bool

// Reexec runs this process as the helper the engine re-executed it as, if it is one, and
// returns the helper's exit code and true; the caller exits with the code. For any other
// process it does nothing and returns false.
func Reexec() (code int, ok bool) {
	reexecCalled.Store(true)
	if v, isSilo := os.LookupEnv(siloInitEnv); isSilo {
		return runSiloInit(v == "made"), true
	}
	if name, isVM := os.LookupEnv(vmInitEnv); isVM {
		return runVMInit(name, os.Getenv(vmInitRootEnv)), true
	}
	return 0, false
}

// checkReexec is NewEngine's check that the binary calls Reexec.
func checkReexec() error {
	if !reexecCalled.Load() {
		return fmt.Errorf("hcsemu: the program running the engine must call hcsemu.Reexec first (in main, or TestMain for tests): the engine re-executes it as a container's silo init and a utility VM's init")
	}
	return nil
}
