//go:build !linux && !windows

package main

import (
	"errors"
	"io"
)

// ps lists processes on Linux (where hcsemu runs the workload) and Windows (a HostProcess
// container runs its Windows build on the host).
func ps(io.Writer) error { return errors.New("ps: not supported on this platform") }

func listProcesses() ([]proc, error) {
	return nil, errors.New("listing processes is not supported on this platform")
}
