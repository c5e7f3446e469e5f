package main

import (
	"sort"
	"strings"
)

// proc is one process of listProcesses.
type proc struct {
	pid  int
	name string
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
