package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// isTerminal reports whether f is a console: GetConsoleMode succeeds only on a console handle,
// which is what HCS gives a process created with EmulateConsole (a pseudo console).
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}

// consoleSize returns the size of the console's visible window. It is the window and not the
// screen buffer (which may be taller, for scrollback) that ResizePseudoConsole sets, and so what
// HCS changes for a ConsoleSize modify of a process with a pseudo console.
func consoleSize(f *os.File) (rows, cols int, err error) {
	var info windows.ConsoleScreenBufferInfo
	if err := windows.GetConsoleScreenBufferInfo(windows.Handle(f.Fd()), &info); err != nil {
		return 0, 0, fmt.Errorf("console size of %s (GetConsoleScreenBufferInfo): %w", f.Name(), err)
	}
	w := info.Window
	return int(w.Bottom-w.Top) + 1, int(w.Right-w.Left) + 1, nil
}
