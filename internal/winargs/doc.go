// Package winargs converts between a Windows command line and the arguments a Windows program's
// C runtime sees: Split applies CommandLineToArgvW's rules, Join quotes arguments so that Split
// gives them back (Go's syscall.EscapeArg rules). The shim writes HCS command lines with Join,
// hcsemu splits them with Split, and the test workload's stand-ins for Windows tools
// (test/workload) use both, so every side agrees on one set of rules. It imports only the
// standard library: the workload links it into a binary that runs in a container.
package winargs
