package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// ps lists /proc: the processes of the PID namespace whose procfs is mounted there.
func ps(w io.Writer) error {
	procs, err := listProcesses()
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	for _, p := range procs {
		fmt.Fprintf(w, "%d %s\n", p.pid, p.name)
	}
	return nil
}

// listProcesses reads /proc, sorted by PID; name is argv[0].
func listProcesses() ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []proc
	for _, e := range entries { // ReadDir sorts by name; PIDs are sorted below
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		name, _, _ := bytes.Cut(b, []byte{0})
		procs = append(procs, proc{pid: n, name: string(name)})
	}
	sortByPID(procs)
	return procs, nil
}
