package compute

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// adminCaps are what an administrator account's processes keep when they run under their own
// uid: the capabilities that bypass file permissions and ownership, as an elevated
// administrator's token holds SeBackupPrivilege, SeRestorePrivilege and
// SeTakeOwnershipPrivilege, and may signal any process of the container.
var adminCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_KILL}

// setCredential makes the process run as the account. uid 0 (ContainerAdministrator) is the
// daemon's own identity and needs nothing. Every other account gets CAP_NET_BIND_SERVICE:
// Windows has no privileged ports, any user may listen on port 80.
func (a *account) setCredential(sys *syscall.SysProcAttr) {
	if a.UID == 0 {
		return
	}
	sys.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{a.GID}}
	sys.AmbientCaps = []uintptr{unix.CAP_NET_BIND_SERVICE}
	if a.Admin {
		sys.AmbientCaps = append(sys.AmbientCaps, adminCaps...)
	}
}

// createProfile makes the account's profile folders in the volume, owned by the account, as
// Windows' User Profile Service does at its first logon; folders there already (from a layer or
// an earlier logon) are given to the account too, which owns its profile on Windows.
// ContainerAdministrator's profile is left as the layers have it: Microsoft's base images are
// built as ContainerAdministrator and ship its profile (assumption), and a container of the
// default user keeps the volume as its layers made it.
func (v *volume) createProfile(a *account) error {
	if a.UID == 0 {
		return nil
	}
	for _, d := range a.profileDirs() {
		if err := v.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := v.root.Lchown(d, int(a.UID), int(a.GID)); err != nil {
			return err
		}
	}
	return nil
}
