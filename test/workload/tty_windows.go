package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// isTerminal reports whether f is a console: GetConsoleMode succeeds only on a console handle,
// which is what HCS gives a process created with EmulateConsole (a pseudo console).
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
