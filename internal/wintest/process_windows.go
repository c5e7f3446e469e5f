package wintest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// Under Wine every Windows process is a Linux process whose command line (/proc/PID/cmdline)
// is the Windows command line, and Linux's /proc is reachable through drive Z: (Wine's default
// dosdevices mapping of /). Files are opened by wineserver on the process's behalf, so
// Z:\proc\self is wineserver's entry, not the caller's: a process is found by its command line.

// UnixPIDOf returns the Linux pid of the one running Wine process whose command line contains
// marker (give the process a unique argument to find it by).
func UnixPIDOf(marker string) (int, error) {
	entries, err := os.ReadDir(`Z:\proc`)
	if err != nil {
		return 0, fmt.Errorf("find the Wine process %q: %w", marker, err)
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(`Z:\proc\` + e.Name() + `\cmdline`)
		if err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("find the Wine process %q: %d Linux processes have it in their command line (%v), want 1", marker, len(found), found)
	}
	return found[0], nil
}

// WaitUnixExit waits, at most timeout, until the Linux process pid of a Wine process that was
// terminated and waited for has really exited, and so has closed its files and sockets.
//
// On Windows, terminating a process closes its handles before the process object is signalled:
// when WaitForSingleObject (Go's Process.Wait) returns, its sockets are closed and the peer has
// its FIN. Wine 8 signals the process as soon as wineserver has marked its threads dead and then
// lets the Linux process unwind, which keeps its descriptors (sockets among them) open a while
// longer: up to about 190 ms measured on this project's loaded 2-core machine, more on a slower
// one. A test that checks what a service does when a client dies calls this after Wait, under
// Wine only; on Windows there is nothing to wait for.
func WaitUnixExit(pid int, timeout time.Duration) error {
	path := `Z:\proc\` + strconv.Itoa(pid) + `\stat`
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && exitedState(b)) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait for Linux process %d: %w", pid, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Linux process %d of a terminated Wine process still runs after %v", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exitedState reports whether a /proc/PID/stat line is of a process that has exited: a zombie
// (Z) or a dead one (X), whose files the kernel has closed already (proc(5): the state is the
// field after the parenthesised command name).
func exitedState(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	s := stat[i+2]
	return s == 'Z' || s == 'X'
}
