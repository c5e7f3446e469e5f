//go:build !linux

package main

import (
	"errors"
	"io"
)

// ps is Linux-only: the workload lists processes only where hcsemu runs it.
func ps(io.Writer) error { return errors.New("ps: not supported on this platform") }

func listProcesses() ([]proc, error) {
	return nil, errors.New("listing processes is not supported on this platform")
}
