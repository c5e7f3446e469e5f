package compute

import (
	"syscall"
)

// setCredential makes the process run as the account (winlinux.Account.SetCredential).
func (a *account) setCredential(sys *syscall.SysProcAttr) { a.Account.SetCredential(sys) }

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
