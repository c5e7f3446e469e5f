package main

import (
	"sort"
	"strings"
)

// proc is one process of listProcesses, with what Get-Process shows of it where Linux has it.
type proc struct {
	pid  int
	name string
	// handles is its open file descriptors (-1: not readable by this account, as another
	// account's process on Linux); ws (working set) its resident memory and pm (private memory)
	// its anonymous resident and swapped memory, in bytes; cpu its user and system time in
	// seconds; sid the Windows session Get-Process shows in SI (see ps_linux.go).
	handles int
	ws, pm  int64
	cpu     float64
	sid     int
}

func sortByPID(p []proc) { sort.Slice(p, func(i, j int) bool { return p[i].pid < p[j].pid }) }

// sortProcs orders by name without regard to case, then PID, as Get-Process does.
func sortProcs(p []proc) {
	sort.SliceStable(p, func(i, j int) bool {
		a, b := strings.ToLower(p[i].name), strings.ToLower(p[j].name)
		if a != b {
			return a < b
		}
		return p[i].pid < p[j].pid
	})
}
