package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal: TCGETS succeeds only on a tty (or a pty, which is
// what hcsemu gives a process created with EmulateConsole).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// consoleSize returns the terminal's window size (TIOCGWINSZ), which hcsemu sets on the pty from
// the process's ConsoleSize and from each ConsoleSize modify.
func consoleSize(f *os.File) (rows, cols int, err error) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0, fmt.Errorf("console size of %s (TIOCGWINSZ): %w", f.Name(), err)
	}
	return int(ws.Row), int(ws.Col), nil
}
