package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/Microsoft/go-winio/pkg/bindfilter"
	"github.com/Microsoft/go-winio/pkg/guid"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
)

// New returns the Windows host's HostProcess services.
func New() (Host, error) { return winHost{}, nil }

type winHost struct{}

// Logon constants (winbase.h, LogonUserW).
const (
	logon32LogonInteractive = 2
	logon32LogonService     = 5
	logon32ProviderDefault  = 0
)

// NetUserAdd's USER_INFO_1 (lmaccess.h) and its constants.
type userInfo1 struct {
	Name        *uint16
	Password    *uint16
	PasswordAge uint32
	Priv        uint32
	HomeDir     *uint16
	Comment     *uint16
	Flags       uint32
	ScriptPath  *uint16
}

const (
	userPrivUser        = 1       // USER_PRIV_USER
	ufScript            = 0x1     // UF_SCRIPT: "must be set" for USER_INFO_1 (NetUserAdd)
	ufNormalAccount     = 0x200   // UF_NORMAL_ACCOUNT
	ufDontExpirePasswd  = 0x10000 // UF_DONT_EXPIRE_PASSWD
	nerrUserNotFound    = 2221    // NERR_UserNotFound
	nerrGroupNotFound   = 2220    // NERR_GroupNotFound
	errorNoSuchAlias    = 1376    // ERROR_NO_SUCH_ALIAS: NetLocalGroupGetInfo of no such local group
	maxLocalAccountName = 20      // "User names are limited to 20 characters" (NetUserAdd, USER_INFO_0)
)

// localGroupMembersInfo0 is LOCALGROUP_MEMBERS_INFO_0.
type localGroupMembersInfo0 struct{ Sid *windows.SID }

type winToken struct{ t windows.Token }

func (t *winToken) Close() error { return t.t.Close() }

// Logon returns the token of user, making a local account for a group (hcsshim's logon.go
// rules; the account name is the caller's, at most 20 characters).
func (winHost) Logon(ctx context.Context, user, account string, inherit bool) (Token, error) {
	if inherit {
		var t windows.Token
		if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ALL_ACCESS, &t); err != nil {
			return nil, fmt.Errorf("open the shim's own token (annotation microsoft.com/hostprocess-inherit-user): %w", err)
		}
		return &winToken{t}, nil
	}
	if user == "" {
		return nil, fmt.Errorf("process.user.username: empty; a HostProcess container runs as a named account or local group: %w", errdefs.ErrInvalidArgument)
	}
	if isLocalGroup(user) {
		return logonGroupMember(user, account)
	}
	domain, name, found := strings.Cut(user, `\`)
	if !found {
		domain, name = "", user
	} else if strings.Contains(name, `\`) {
		return nil, fmt.Errorf("process.user.username %q: want NAME or DOMAIN\\NAME: %w", user, errdefs.ErrInvalidArgument)
	}
	logonType := uint32(logon32LogonInteractive)
	if strings.EqualFold(domain, "NT AUTHORITY") {
		// SYSTEM, LOCAL SERVICE and NETWORK SERVICE log on as services (LogonUserW:
		// "LOGON32_LOGON_SERVICE … the account must have the service privilege enabled").
		logonType = logon32LogonService
	}
	var t windows.Token
	if err := logonUser(windows.StringToUTF16Ptr(name), utf16OrNil(domain), nil, logonType, logon32ProviderDefault, &t); err != nil {
		return nil, fmt.Errorf("log on %q (process.user.username): %w", user, err)
	}
	return &winToken{t}, nil
}

func isLocalGroup(name string) bool {
	var buf *byte
	if err := netLocalGroupGetInfo(nil, windows.StringToUTF16Ptr(name), 1, &buf); err != nil {
		return false
	}
	_ = windows.NetApiBufferFree(buf)
	return true
}

// logonGroupMember makes the local account account, with a random password, a member of group,
// and logs it on (hcsshim: makeLocalAccount and processToken).
func logonGroupMember(group, account string) (_ Token, retErr error) {
	if account == "" || len(account) > maxLocalAccountName {
		return nil, fmt.Errorf("temporary account %q for group %q: want 1 to %d characters: %w", account, group, maxLocalAccountName, errdefs.ErrInvalidArgument)
	}
	g, err := guid.NewV4()
	if err != nil {
		return nil, err
	}
	pw := windows.StringToUTF16Ptr(g.String())
	name := windows.StringToUTF16Ptr(account)
	ui := userInfo1{Name: name, Password: pw, Priv: userPrivUser, Flags: ufScript | ufNormalAccount | ufDontExpirePasswd}
	if err := netUserAdd(nil, 1, (*byte)(unsafe.Pointer(&ui)), nil); err != nil {
		return nil, fmt.Errorf("create the local account %q for group %q: %w", account, group, err)
	}
	defer func() {
		if retErr != nil {
			_ = netUserDel(nil, name)
		}
	}()
	sid, _, _, err := windows.LookupSID("", account)
	if err != nil {
		return nil, fmt.Errorf("look up the local account %q: %w", account, err)
	}
	member := localGroupMembersInfo0{Sid: sid}
	if err := netLocalGroupAddMembers(nil, windows.StringToUTF16Ptr(group), 0, (*byte)(unsafe.Pointer(&member)), 1); err != nil {
		return nil, fmt.Errorf("add the local account %q to group %q: %w", account, group, err)
	}
	var t windows.Token
	if err := logonUser(name, windows.StringToUTF16Ptr("."), pw, logon32LogonInteractive, logon32ProviderDefault, &t); err != nil {
		return nil, fmt.Errorf("log on the local account %q: %w", account, err)
	}
	return &winToken{t}, nil
}

// DeleteAccount deletes a local account Logon made; a missing one is done.
func (winHost) DeleteAccount(_ context.Context, account string) error {
	err := netUserDel(nil, windows.StringToUTF16Ptr(account))
	var errno windows.Errno
	if err == nil || (errors.As(err, &errno) && errno == nerrUserNotFound) {
		return nil
	}
	return fmt.Errorf("delete the local account %q: %w", account, err)
}

// Bind maps target at path host-wide with the bind filter (BfSetupFilter without a job).
func (winHost) Bind(_ context.Context, path, target string, readOnly bool) error {
	if err := bindfilter.ApplyFileBinding(strings.TrimSuffix(path, `\`), drivePath(target), readOnly); err != nil {
		return fmt.Errorf("bind %q at %q: %w", target, path, err)
	}
	return nil
}

// drivePath turns \\?\Volume{GUID}\REST into the drive path of that volume when it has one
// (GetVolumePathNamesForVolumeNameW) and REST is not empty. go-winio's ApplyFileBinding appends
// a separator to every volume path, which then names a folder, so a single file given as a
// volume path (kubelet's c:\dev\termination-log, whose source containerd resolves so on the
// emulated node) must reach the filter by its drive path. A volume's root, and a volume without
// a drive path (the container's mounted layers), stay as they are.
func drivePath(p string) string {
	const prefix = `\\?\Volume{`
	if !strings.HasPrefix(p, prefix) {
		return p
	}
	end := strings.Index(p, `}\`)
	if end < 0 || end+2 == len(p) {
		return p
	}
	volume, rest := p[:end+2], p[end+2:]
	buf := make([]uint16, 1024)
	var n uint32
	if err := windows.GetVolumePathNamesForVolumeName(windows.StringToUTF16Ptr(volume), &buf[0], uint32(len(buf)), &n); err != nil {
		return p
	}
	first := windows.UTF16ToString(buf) // the list is NUL-separated; the first is enough
	if first == "" {
		return p
	}
	return strings.TrimSuffix(first, `\`) + `\` + rest
}

// Unbind removes the mapping at path (BfRemoveMapping). When that fails and the volume's
// mappings (BfGetMappings) do not list path, it was already gone, which is done (assumption:
// the error BfRemoveMapping returns for a path without a mapping is not documented).
func (winHost) Unbind(_ context.Context, path string) error {
	p := strings.TrimSuffix(path, `\`)
	err := bindfilter.RemoveFileBinding(p)
	if err == nil {
		return nil
	}
	if mappings, merr := bindfilter.GetBindMappings(volumeOf(p)); merr == nil {
		for _, m := range mappings {
			if strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(m.MountPoint, `\\?\`), `\`), p) {
				return fmt.Errorf("remove the binding at %q: %w", path, err)
			}
		}
		return nil
	}
	return fmt.Errorf("remove the binding at %q: %w", path, err)
}

// volumeOf is the volume root of a drive path (C:\…) for GetBindMappings.
func volumeOf(p string) string {
	if len(p) >= 2 && p[1] == ':' {
		return p[:2] + `\`
	}
	return p
}

func utf16OrNil(s string) *uint16 {
	if s == "" {
		return nil
	}
	return windows.StringToUTF16Ptr(s)
}
