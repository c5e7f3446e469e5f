package task

import (
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Signal numbers containerd sends (Linux numbering, which containerd uses for every platform
// when the shim does not advertise Windows signals).
const (
	sigINT  = 2
	sigKILL = 9
	sigTERM = 15
)

// killAction is what a signal means for a Windows process: a console control event, or
// termination.
type killAction struct {
	terminate bool
	event     schema2.ProcessSignal
}

// signalAction maps a signal as Windows does (and hcsshim for WCOW): SIGINT is Ctrl+C,
// SIGTERM a shutdown control event, SIGKILL termination. Anything else is refused: a Windows
// process has no way to receive it.
func signalAction(sig uint32) (killAction, error) {
	switch sig {
	case sigINT:
		return killAction{event: schema2.SignalCtrlC}, nil
	case sigTERM:
		return killAction{event: schema2.SignalCtrlShutdown}, nil
	case sigKILL:
		return killAction{terminate: true}, nil
	}
	return killAction{}, fmt.Errorf("signal %d is not supported for Windows processes (use SIGINT=2, SIGTERM=15 or SIGKILL=9): %w", sig, errdefs.ErrInvalidArgument)
}
