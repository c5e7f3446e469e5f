package main

import (
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ps lists the processes this one can see, as ps_linux.go does: on Windows, a HostProcess
// container runs the workload's Windows build on the host, where it sees the host's processes.
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

// listProcesses takes a snapshot of the processes (CreateToolhelp32Snapshot,
// TH32CS_SNAPPROCESS), sorted by PID; name is the executable's file name, as Task Manager shows
// it; the session comes from ProcessIdToSessionId. Handles and memory are not read (-1, 0).
func listProcesses() ([]proc, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("CreateToolhelp32Snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	var procs []proc
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		p := proc{pid: int(e.ProcessID), name: windows.UTF16ToString(e.ExeFile[:]), handles: -1}
		var sid uint32
		if windows.ProcessIdToSessionId(e.ProcessID, &sid) == nil {
			p.sid = int(sid)
		}
		procs = append(procs, p)
	}
	if err != windows.ERROR_NO_MORE_FILES {
		return nil, fmt.Errorf("Process32Next: %w", err)
	}
	sortByPID(procs)
	return procs, nil
}
