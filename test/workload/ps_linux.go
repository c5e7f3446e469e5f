package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
		dir := filepath.Join("/proc", e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		name, _, _ := bytes.Cut(b, []byte{0})
		p := proc{pid: n, name: string(name), handles: -1}
		if fds, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
			p.handles = len(fds)
		}
		p.ws, p.pm = memoryOf(dir)
		p.cpu = cpuOf(dir)
		// PID 1 is hcsemu's silo init, which stands for the container's system processes,
		// in session 0 on Windows; the processes HCS starts run in the container's user
		// session (assumption: 1, the first session after 0; a Windows Server Core container
		// has been observed with its processes in session 2).
		if n != 1 {
			p.sid = 1
		}
		procs = append(procs, p)
	}
	sortByPID(procs)
	return procs, nil
}

// memoryOf reads VmRSS (the working set) and RssAnon+VmSwap (private memory) of a process, in
// bytes; 0 when unknown.
func memoryOf(dir string) (ws, pm int64) {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		key, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			ws = kb << 10
		case "RssAnon", "VmSwap":
			pm += kb << 10
		}
	}
	return ws, pm
}

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ, 100 on every Linux architecture
// Go supports: the kernel's ABI, not its internal HZ).
const userHZ = 100

// cpuOf reads a process's user and system time in seconds; 0 when unknown.
func cpuOf(dir string) float64 {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of proc(5)
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(utime+stime) / userHZ
}
