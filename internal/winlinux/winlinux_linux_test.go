package winlinux

import (
	"syscall"
	"testing"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// TestFind: an account is named by its name alone or "Domain\Name", in any case; another
// domain's name is not it.
func TestFind(t *testing.T) {
	for user, want := range map[string]string{
		`NT AUTHORITY\SYSTEM`:          "SYSTEM",
		`nt authority\network service`: "NETWORK SERVICE",
		`local service`:                "LOCAL SERVICE",
	} {
		if a, ok := Find(ServiceAccounts(), user); !ok || a.Name != want {
			t.Errorf("Find(%q) = %+v, %v; want %s", user, a, ok, want)
		}
	}
	for _, user := range []string{`BUILTIN\SYSTEM`, "ContainerUser", `\SYSTEM`, ""} {
		if a, ok := Find(ServiceAccounts(), user); ok {
			t.Errorf("Find(%q) = %+v, want none", user, a)
		}
	}
}

// TestConsoleSignalAndExitCode: CtrlC is SIGINT and every other event SIGTERM; a process's own
// code stays, SIGKILL is 1, SIGINT and SIGTERM are STATUS_CONTROL_C_EXIT, other signals 128+n.
func TestConsoleSignalAndExitCode(t *testing.T) {
	if ConsoleSignal(schema2.SignalCtrlC) != syscall.SIGINT || ConsoleSignal(schema2.SignalCtrlBreak) != syscall.SIGTERM || ConsoleSignal(schema2.SignalCtrlShutdown) != syscall.SIGTERM {
		t.Error("console events: want CtrlC SIGINT, the others SIGTERM")
	}
	// A wait status: the exit code in bits 8-15, or the terminating signal in bits 0-6.
	for ws, want := range map[syscall.WaitStatus]uint32{
		3 << 8:                              3,
		syscall.WaitStatus(syscall.SIGKILL): ExitCodeTerminated,
		syscall.WaitStatus(syscall.SIGINT):  ExitCodeCtrlC,
		syscall.WaitStatus(syscall.SIGTERM): ExitCodeCtrlC,
		syscall.WaitStatus(syscall.SIGHUP):  128 + 1,
	} {
		if got := ExitCode(ws); got != want {
			t.Errorf("ExitCode(%#x) = %#x, want %#x", uint32(ws), got, want)
		}
	}
}
