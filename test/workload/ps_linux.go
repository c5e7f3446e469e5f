package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// ps lists /proc: the processes of the PID namespace whose procfs is mounted there.
func ps(w io.Writer) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	var pids []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		name, _, _ := bytes.Cut(b, []byte{0})
		fmt.Fprintf(w, "%d %s\n", pid, name)
	}
	return nil
}
