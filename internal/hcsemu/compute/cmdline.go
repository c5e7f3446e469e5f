package compute

import "github.com/openhcs/runhcs/internal/winargs"

// ParseCommandLine splits a Windows command line into arguments with the rules of
// CommandLineToArgvW, which is how a Windows program's C runtime sees its argv (winargs.Split).
func ParseCommandLine(cmd string) []string { return winargs.Split(cmd) }
