package hcs

import (
	"os"
	"testing"
)

// contractTeardown stops what the contract suite started (the emulator daemon), if anything.
var contractTeardown func()

func TestMain(m *testing.M) {
	// The client-death test re-executes this binary to play the client that is killed.
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	if contractTeardown != nil {
		contractTeardown()
	}
	os.Exit(code)
}
