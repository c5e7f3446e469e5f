//go:build !linux && !windows

package main

import (
	"os"
	"runtime"
)

// isTerminal is only implemented for the platforms the workload runs on.
func isTerminal(*os.File) bool { return false }

// consoleSize is only implemented for the platforms the workload runs on.
func consoleSize(*os.File) (rows, cols int, err error) {
	return 0, 0, usageError{"tty size is not supported on " + runtime.GOOS}
}
