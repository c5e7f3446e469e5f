//go:build linux

package main

import "testing"

// TestWineDebugChannels: the node's Windows processes log no Wine debug channel unless
// RUNHCS_WINNODE_WINEDEBUG asks for some, and then exactly those.
func TestWineDebugChannels(t *testing.T) {
	t.Setenv("RUNHCS_WINNODE_WINEDEBUG", "")
	if got := wineDebugChannels(); got != "-all" {
		t.Fatalf("unset: WINEDEBUG=%q, want -all", got)
	}
	t.Setenv("RUNHCS_WINNODE_WINEDEBUG", "err+all,+process")
	if got := wineDebugChannels(); got != "err+all,+process" {
		t.Fatalf("set: WINEDEBUG=%q, want err+all,+process", got)
	}
}
