package compute

import (
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/winlinux"
)

// account is one account of a container's own SAM, as a Windows base image has them, and the
// Linux identity the emulator runs its processes with (internal/winaccount; the table is in
// docs/emulator.md, "Users").
type account struct{ winlinux.Account }

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
	{winlinux.Account{Name: "ContainerAdministrator", Domain: "User Manager", UID: 0, GID: 0, Admin: true, Profile: `C:\Users\ContainerAdministrator`}},
	{winlinux.Account{Name: "ContainerUser", Domain: "User Manager", UID: 1000, GID: winlinux.UsersGID, Profile: `C:\Users\ContainerUser`}},
	{winlinux.System},
	{winlinux.LocalService},
	{winlinux.NetworkService},
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
	for i := range accounts {
		if accounts[i].Is(user) {
			return &accounts[i], nil
		}
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
