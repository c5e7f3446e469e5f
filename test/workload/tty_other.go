//go:build !linux && !windows

package main

import "os"

// isTerminal is only implemented for the platforms the workload runs on.
func isTerminal(*os.File) bool { return false }
