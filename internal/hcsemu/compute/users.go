package compute

import (
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// account is one account of a container's own SAM, as a Windows base image has them, and the
// Linux identity the emulator runs its processes with (the table is in docs/emulator.md, "Users").
type account struct {
	// Name and Domain are what whoami shows, "Domain\Name".
	Name, Domain string
	// UID and GID are the Linux identity of the account's processes inside the container.
	UID, GID uint32
	// Admin accounts may write where only administrators may: the layers' files (owned by
	// uid 0, not writable by others). Their processes hold the capabilities that bypass
	// file permissions, as an elevated administrator's token holds SeBackupPrivilege,
	// SeRestorePrivilege and SeTakeOwnershipPrivilege.
	Admin bool
	// Profile is the account's profile folder, %USERPROFILE%.
	Profile string
}

// The container's accounts. ContainerAdministrator and ContainerUser are the two accounts of
// Microsoft's base images (Kubernetes' runAsUserName documentation names them); whoami shows
// them as "user manager\containeruser" with SID S-1-5-93-2-2 in BUILTIN\Users (S-1-5-32-545)
// (moby/buildkit#5791), and %USERDOMAIN%\%USERNAME% is "User Manager\ContainerUser"
// (dotnet/dotnet-docker#728). The NT AUTHORITY service accounts
// are the well-known accounts every Windows installation has; assumption: HCS logs them on in a
// process-isolated container of Windows Server 2019 and later (moby/moby#28585 reports
// "NT AUTHORITY\SYSTEM" refused with 0x52e on a Windows Server 2016 image, which the emulator,
// modelling 2019 and later hosts, does not reproduce).
var accounts = []account{
	{Name: "ContainerAdministrator", Domain: "User Manager", UID: 0, GID: 0, Admin: true, Profile: `C:\Users\ContainerAdministrator`},
	{Name: "ContainerUser", Domain: "User Manager", UID: 1000, GID: 545, Profile: `C:\Users\ContainerUser`},
	{Name: "SYSTEM", Domain: "NT AUTHORITY", UID: 18, GID: 0, Admin: true, Profile: `C:\Windows\System32\config\systemprofile`},
	{Name: "LOCAL SERVICE", Domain: "NT AUTHORITY", UID: 19, GID: 545, Profile: `C:\Windows\ServiceProfiles\LocalService`},
	{Name: "NETWORK SERVICE", Domain: "NT AUTHORITY", UID: 20, GID: 545, Profile: `C:\Windows\ServiceProfiles\NetworkService`},
}

// defaultAccount is whom HCS runs a container process as when ProcessParameters.User is empty:
// ContainerAdministrator, the user of Microsoft's base images' config (hcsshim passes the
// spec's Username, empty unless the image or the caller names one).
const defaultAccount = "ContainerAdministrator"

// lookupAccount finds the account a ProcessParameters.User names: its name alone, or
// "Domain\Name", case-insensitively as Windows compares account names. An account the container
// does not have fails as HcsCreateProcess does, with ERROR_LOGON_FAILURE.
func lookupAccount(user string) (*account, error) {
	if user == "" {
		user = defaultAccount
	}
	domain, name, qualified := strings.Cut(user, `\`)
	if !qualified {
		name, domain = user, ""
	}
	for i := range accounts {
		a := &accounts[i]
		if !strings.EqualFold(a.Name, name) {
			continue
		}
		if qualified && !strings.EqualFold(a.Domain, domain) {
			continue
		}
		return a, nil
	}
	return nil, hresult.Errorf(computecore.E_LOGON_FAILURE, "User=%q: the container has no such account (it has ContainerAdministrator, ContainerUser and NT AUTHORITY\\SYSTEM, LOCAL SERVICE, NETWORK SERVICE)", user)
}

// environment is the environment Windows gives a process of the account (CreateEnvironmentBlock:
// the user's variables over the system's), which the process's own Environment then overrides.
// The names and values are those of Microsoft's "Recognized environment variables"
// (learn.microsoft.com/windows/deployment/usmt/usmt-recognized-environment-variables):
// USERPROFILE, APPDATA (%USERPROFILE%\AppData\Roaming), LOCALAPPDATA (…\AppData\Local), TEMP
// and TMP (%LOCALAPPDATA%\Temp), HOMEDRIVE and HOMEPATH.
func (a *account) environment() map[string]string {
	env := map[string]string{
		"USERNAME":     a.Name,
		"USERDOMAIN":   a.Domain,
		"USERPROFILE":  a.Profile,
		"APPDATA":      a.Profile + `\AppData\Roaming`,
		"LOCALAPPDATA": a.Profile + `\AppData\Local`,
		"TEMP":         a.Profile + `\AppData\Local\Temp`,
		"TMP":          a.Profile + `\AppData\Local\Temp`,
		"HOMEDRIVE":    "C:",
		"HOMEPATH":     strings.TrimPrefix(a.Profile, "C:"),
	}
	return env
}

// profileDirs are the folders of the account's profile that Windows' User Profile Service
// creates at the account's first logon, relative to C:\ with forward slashes.
func (a *account) profileDirs() []string {
	p := strings.ReplaceAll(strings.TrimPrefix(a.Profile, `C:\`), `\`, "/")
	return []string{p, p + "/AppData", p + "/AppData/Roaming", p + "/AppData/Local", p + "/AppData/Local/Temp"}
}
