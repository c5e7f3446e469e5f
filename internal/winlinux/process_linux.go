package winlinux

import (
	"syscall"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Exit codes a Windows process gets when it did not choose one.
const (
	// ExitCodeTerminated is what HcsTerminateProcess and TerminateJobObject leave: HCS
	// terminates the process with exit code 1 (observed: containerd reports 1 for a killed
	// Windows container task), and hcsshim terminates a job with 1.
	ExitCodeTerminated = 1
	// ExitCodeCtrlC is STATUS_CONTROL_C_EXIT (0xC000013A), the exit code of a console process
	// the default control handler ended (CtrlC, CtrlBreak, CtrlClose...).
	ExitCodeCtrlC = 0xC000013A
)

// ConsoleSignal maps a console control event to the signal that stands for it on Linux: CtrlC
// is SIGINT; the others (CtrlBreak, CtrlClose, CtrlLogOff, CtrlShutdown) ask a process to end,
// which is SIGTERM.
func ConsoleSignal(sig schema2.ProcessSignal) syscall.Signal {
	if sig == schema2.SignalCtrlC {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

// ExitCode is the Windows exit code of a process that ended with ws: its own code; a kill
// (SIGKILL) is ExitCodeTerminated; SIGINT and SIGTERM, which stand for console control events,
// are ExitCodeCtrlC, what the default handler leaves; any other signal is 128 plus its number.
func ExitCode(ws syscall.WaitStatus) uint32 {
	switch {
	case ws.Exited():
		return uint32(ws.ExitStatus())
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		return ExitCodeTerminated
	case ws.Signaled() && (ws.Signal() == syscall.SIGINT || ws.Signal() == syscall.SIGTERM):
		return ExitCodeCtrlC
	case ws.Signaled():
		return 128 + uint32(ws.Signal())
	}
	return ExitCodeTerminated
}
