package uvm

import (
	"os"
	"path/filepath"
)

// ScratchDisk is a container's scratch disk in its scratch snapshot: sandbox.vhdx, where
// containerd's windows snapshotter and this project's Windows snapshotter make it and hcsshim
// attaches it from. The emulator names its emulated disks the same (internal/hcsemu/storage's
// ScratchDisk); the Linux-native snapshotter's folder scratches have none yet, so a Hyper-V
// container over one fails to attach, naming the missing file.
func ScratchDisk(scratch string) string { return filepath.Join(scratch, "sandbox.vhdx") }

// VMScratchDisk is the utility VM's scratch disk in the sandbox's scratch snapshot, which the
// snapshotter makes for the label containerd.io/snapshot/io.microsoft.vm.storage.scratch
// (vm\sandbox.vhdx, a copy of the base layer's UtilityVM\SystemTemplate.vhdx); "" when the
// snapshot has none. hcsshim copies the template itself when absent; this shim boots without a
// scratch instead (CRI never sets the label).
func VMScratchDisk(scratch string) string {
	p := filepath.Join(scratch, "vm", "sandbox.vhdx")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
