//go:build !windows

package uvm

import (
	"os"
	"path/filepath"
)

// ScratchDisk is a container's scratch disk under the emulator: the scratch snapshot's folder
// itself, a folder scratch layer (internal/snapshot's scratch_linux.go makes no VHDX). This is
// the emulator's convention, not Windows'; disk_windows.go has Windows'.
func ScratchDisk(scratch string) string { return scratch }

// VMScratchDisk is the utility VM's scratch under the emulator: the folder vm/ that the
// snapshotter makes for the label containerd.io/snapshot/io.microsoft.vm.storage.scratch; ""
// when there is none.
func VMScratchDisk(scratch string) string {
	p := filepath.Join(scratch, "vm")
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return ""
	}
	return p
}
