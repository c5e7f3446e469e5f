// Package winlinux is how the emulator stands for a Windows process's concepts on Linux, shared
// by hcsemu's compute systems (internal/hcsemu/compute) and the HostProcess containers of the
// Linux-native mode (internal/hostprocess): the Linux identity of Windows accounts (the
// accounts of a container's own SAM and the well-known service accounts; the table is in
// docs/emulator.md, "Users"), the signal that stands for a console control event, and the
// Windows exit code of a Linux wait status.
//
// It imports internal/hcs/schema2 (the names of the console control events) and nothing else
// of the project.
package winlinux

import "strings"

// Account is one Windows account and the Linux identity its processes run with.
type Account struct {
	// Name and Domain are what whoami shows, "Domain\Name".
	Name, Domain string
	// UID and GID are the Linux identity of the account's processes.
	UID, GID uint32
	// Admin accounts may write where only administrators may: their processes hold the
	// capabilities that bypass file permissions (AdminCaps), as an elevated administrator's
	// token holds SeBackupPrivilege, SeRestorePrivilege and SeTakeOwnershipPrivilege.
	Admin bool
	// Profile is the account's profile folder, %USERPROFILE%.
	Profile string
}

// UsersGID is the Linux group of BUILTIN\Users (S-1-5-32-545: its relative id), the group of
// every account that is not an administrator; administrators have gid 0.
const UsersGID = 545

// The well-known service accounts every Windows installation has (NT AUTHORITY).
var (
	System         = Account{Name: "SYSTEM", Domain: "NT AUTHORITY", UID: 18, GID: 0, Admin: true, Profile: `C:\Windows\System32\config\systemprofile`}
	LocalService   = Account{Name: "LOCAL SERVICE", Domain: "NT AUTHORITY", UID: 19, GID: UsersGID, Profile: `C:\Windows\ServiceProfiles\LocalService`}
	NetworkService = Account{Name: "NETWORK SERVICE", Domain: "NT AUTHORITY", UID: 20, GID: UsersGID, Profile: `C:\Windows\ServiceProfiles\NetworkService`}
)

// ServiceAccounts are System, LocalService and NetworkService.
func ServiceAccounts() []Account { return []Account{System, LocalService, NetworkService} }

// Is reports whether user names the account: its name alone, or "Domain\Name",
// case-insensitively as Windows compares account names.
func (a Account) Is(user string) bool {
	domain, name, qualified := strings.Cut(user, `\`)
	if !qualified {
		name, domain = user, ""
	}
	return strings.EqualFold(a.Name, name) && (!qualified || strings.EqualFold(a.Domain, domain))
}

// Find returns the account of list that user names (Account.Is).
func Find(list []Account, user string) (Account, bool) {
	for _, a := range list {
		if a.Is(user) {
			return a, true
		}
	}
	return Account{}, false
}
