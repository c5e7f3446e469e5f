package winlinux

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// AdminCaps are what an administrator account's processes keep when they run under their own
// uid: the capabilities that bypass file permissions and ownership, as an elevated
// administrator's token holds SeBackupPrivilege, SeRestorePrivilege and
// SeTakeOwnershipPrivilege, and may signal any process.
var AdminCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_KILL}

// SetCredential makes a process started with sys run as the account. uid 0 is the caller's
// own identity (the emulator runs as root) and needs nothing. Every other account gets
// CAP_NET_BIND_SERVICE, since Windows has no privileged ports (any user may listen on port
// 80), and an administrator AdminCaps too.
func (a Account) SetCredential(sys *syscall.SysProcAttr) {
	if a.UID == 0 {
		return
	}
	sys.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{a.GID}}
	sys.AmbientCaps = []uintptr{unix.CAP_NET_BIND_SERVICE}
	if a.Admin {
		sys.AmbientCaps = append(sys.AmbientCaps, AdminCaps...)
	}
}
