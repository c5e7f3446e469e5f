package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/cgroup1"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/winlinux"
)

// New returns the Linux-native mode's HostProcess services: the emulated Windows host is
// hcsemu's, whose root the shim learns from $HCSEMU_ROOT (layout.RootEnv; layout.DefaultRoot
// without it), and its network is that root's host network namespace (layout.HostNetns),
// opened when a process starts: the delete action, which only ends jobs, bindings and
// accounts, must work when the daemon is gone. The job's cgroups need the cgroup v1
// controllers hcsemu uses (layout.CgroupControllers).
func New() (Host, error) {
	root := os.Getenv(layout.RootEnv)
	if root == "" {
		root = layout.DefaultRoot
	}
	netns := layout.HostNetns(root)
	for _, c := range jobControllers {
		if _, err := os.Stat(filepath.Join(cgroup1.MountRoot, c)); err != nil {
			return nil, fmt.Errorf("cgroup v1 controller %q is not mounted at %s: %w", c, filepath.Join(cgroup1.MountRoot, c), err)
		}
	}
	return &linuxHost{netns: netns, accounts: defaultAccountsDir}, nil
}

type linuxHost struct {
	netns    string // the emulated host's network namespace file
	accounts string // where the temporary accounts are recorded
}

// defaultAccountsDir holds one file per temporary local account (tempAccount), named by the
// account, while it exists.
const defaultAccountsDir = "/run/runhcs/hostprocess/accounts"

// The temporary accounts' uids are the lowest free in [tempUIDBase, tempUIDBase+tempUIDCount).
// Assumption: nothing else on the machine uses these uids (above the usual ranges of users,
// system users and subordinate ids of user namespaces, 100000-165535 on Debian by default).
const tempUIDBase, tempUIDCount = 190000, 10000

// localGroups are the local groups of the emulated host a HostProcess container may run as
// (its temporary account a member): BUILTIN\Users and BUILTIN\Administrators, with the Linux
// groups hcsemu gives their members (winlinux: gid 545, and gid 0 with the administrators'
// capabilities).
var localGroups = []winlinux.Account{
	{Name: "Users", Domain: "BUILTIN", GID: winlinux.UsersGID},
	{Name: "Administrators", Domain: "BUILTIN", GID: 0, Admin: true},
}

// linuxToken is the identity a job's processes run with: an account's (uid, gid, the
// administrators' capabilities) or, inherited, the shim's own.
type linuxToken struct {
	acct    winlinux.Account
	inherit bool
}

func (*linuxToken) Close() error { return nil }

// Logon maps the user to a Linux identity as hcsemu maps a container's accounts
// (internal/winlinux): NT AUTHORITY\SYSTEM, LOCAL SERVICE and NETWORK SERVICE are hcsemu's
// uids 18, 19 and 20; a local group (Users, Administrators) gets a temporary account, a uid
// of its own recorded until DeleteAccount; inherit is the shim's own identity. The emulated
// host has no other accounts: any other name fails naming it, as LogonUserW does for an
// account that does not exist.
func (h *linuxHost) Logon(_ context.Context, user, account string, inherit bool) (Token, error) {
	if inherit {
		return &linuxToken{acct: winlinux.Account{Name: "shim", UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}, inherit: true}, nil
	}
	if user == "" {
		return nil, fmt.Errorf("process.user.username: empty; a HostProcess container runs as a named account or local group: %w", errdefs.ErrInvalidArgument)
	}
	if a, ok := winlinux.Find(winlinux.ServiceAccounts(), user); ok {
		return &linuxToken{acct: a}, nil
	}
	if g, ok := winlinux.Find(localGroups, user); ok {
		return h.tempAccount(g, account)
	}
	return nil, fmt.Errorf("log on %q (process.user.username): the emulated host has no such account or local group (it has NT AUTHORITY\\SYSTEM, LOCAL SERVICE, NETWORK SERVICE and the local groups Users and Administrators): %w", user, errdefs.ErrNotFound)
}

// tempAccount makes the local account account, a member of group g: the lowest free uid of
// the range, recorded in a file named by the account ("uid gid group"). An account of that
// name already recorded fails, as NetUserAdd does for an existing user.
func (h *linuxHost) tempAccount(g winlinux.Account, account string) (Token, error) {
	if account == "" || len(account) > 20 || strings.ContainsAny(account, `/\"[]:|<>+=;,?*@`) || account == "." || account == ".." {
		return nil, fmt.Errorf("temporary account %q for group %q: want 1 to 20 characters, none of /\\\"[]:|<>+=;,?*@: %w", account, g.Name, errdefs.ErrInvalidArgument)
	}
	if err := os.MkdirAll(h.accounts, 0o700); err != nil {
		return nil, fmt.Errorf("create the local account %q: %w", account, err)
	}
	unlock, err := lockDir(h.accounts)
	if err != nil {
		return nil, fmt.Errorf("create the local account %q: %w", account, err)
	}
	defer unlock()
	entries, err := os.ReadDir(h.accounts)
	if err != nil {
		return nil, fmt.Errorf("create the local account %q: %w", account, err)
	}
	used := map[uint32]bool{}
	for _, e := range entries {
		if strings.EqualFold(e.Name(), account) {
			return nil, fmt.Errorf("create the local account %q for group %q: the account already exists: %w", account, g.Name, errdefs.ErrAlreadyExists)
		}
		if a, err := h.readAccount(e.Name()); err == nil {
			used[a.UID] = true
		}
	}
	uid := uint32(0)
	for u := uint32(tempUIDBase); u < tempUIDBase+tempUIDCount; u++ {
		if !used[u] {
			uid = u
			break
		}
	}
	if uid == 0 {
		return nil, fmt.Errorf("create the local account %q: all %d temporary uids from %d are in use: %w", account, tempUIDCount, tempUIDBase, errdefs.ErrUnavailable)
	}
	rec := fmt.Sprintf("%d %d %s\n", uid, g.GID, g.Name)
	if err := os.WriteFile(filepath.Join(h.accounts, account), []byte(rec), 0o600); err != nil {
		return nil, fmt.Errorf("create the local account %q: %w", account, err)
	}
	// A local account's domain is the computer's name (USERDOMAIN), the machine's here.
	domain, _ := os.Hostname()
	return &linuxToken{acct: winlinux.Account{Name: account, Domain: strings.ToUpper(domain), UID: uid, GID: g.GID, Admin: g.Admin}}, nil
}

// readAccount reads the record of a temporary account.
func (h *linuxHost) readAccount(account string) (winlinux.Account, error) {
	b, err := os.ReadFile(filepath.Join(h.accounts, account))
	if err != nil {
		return winlinux.Account{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return winlinux.Account{}, fmt.Errorf("account record %s: %q", account, b)
	}
	uid, err1 := strconv.ParseUint(f[0], 10, 32)
	gid, err2 := strconv.ParseUint(f[1], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return winlinux.Account{}, fmt.Errorf("account record %s: %w", account, err)
	}
	return winlinux.Account{Name: account, UID: uint32(uid), GID: uint32(gid)}, nil
}

// lockDir takes an exclusive lock on dir (flock), so that two shims do not give one uid twice.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// DeleteAccount removes a temporary account's record; a missing one is done.
func (h *linuxHost) DeleteAccount(_ context.Context, account string) error {
	if account == "" || strings.ContainsAny(account, `/\`) || account == "." || account == ".." {
		return nil // never made: Logon refuses such names
	}
	if err := os.Remove(filepath.Join(h.accounts, account)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete the local account %q: %w", account, err)
	}
	return nil
}

// Bind bind-mounts target (a folder or a file) at path, read-only if readOnly, making the
// mount point (a folder, or an empty file for a file) when it is missing.
func (h *linuxHost) Bind(_ context.Context, path, target string, readOnly bool) error {
	p, err := localPath(path)
	if err != nil {
		return fmt.Errorf("bind %q at %q: %w", target, path, err)
	}
	t, err := localPath(target)
	if err != nil {
		return fmt.Errorf("bind %q at %q: the target: %w", target, path, err)
	}
	st, err := os.Stat(t)
	if err != nil {
		return fmt.Errorf("bind %q at %q: %w", target, path, err)
	}
	if st.IsDir() {
		err = os.MkdirAll(p, 0o755)
	} else if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("bind %q at %q: the mount point: %w", target, path, err)
	}
	if err := unix.Mount(t, p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %q at %q (%s): %w", target, path, p, err)
	}
	if readOnly {
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(p, unix.MNT_DETACH)
			return fmt.Errorf("bind %q at %q read-only: %w", target, path, err)
		}
	}
	return nil
}

// Unbind unmounts the binding at path (lazily, as the bind filter's mapping goes at once even
// with files open) and removes its mount point when it is an empty folder; no binding is done.
func (h *linuxHost) Unbind(_ context.Context, path string) error {
	p, err := localPath(path)
	if err != nil {
		return fmt.Errorf("remove the binding at %q: %w", path, err)
	}
	for {
		err := unix.Unmount(p, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // not (or no longer) a mount point
		}
		if err != nil {
			return fmt.Errorf("remove the binding at %q (%s): %w", path, p, err)
		}
		// A binding made twice at one path is two mounts: remove them all.
	}
	if st, err := os.Lstat(p); err == nil && st.IsDir() {
		_ = os.Remove(p) // only an empty folder goes
	}
	return nil
}

// localPath is the path on this machine of a path of the emulated host. The emulated host's
// drives are the machine's root: X:\rest (or \\?\X:\rest, with either slash) is /rest, as
// test/workload maps the Windows paths it is given, so a HostProcess container's files at
// C:\hpc\<id>\ are at /hpc/<id>/ (assumption: one root for every drive letter, hcsemu's
// emulated host having one file system). A Linux absolute path is itself. Anything else (a
// relative path, a UNC or volume path) names nothing here.
func localPath(p string) (string, error) {
	q := strings.TrimPrefix(p, `\\?\`)
	if len(q) >= 3 && q[1] == ':' && (q[2] == '\\' || q[2] == '/') && (q[0]|0x20) >= 'a' && (q[0]|0x20) <= 'z' {
		return filepath.Clean("/" + strings.ReplaceAll(q[3:], `\`, "/")), nil
	}
	if strings.HasPrefix(p, "/") {
		return filepath.Clean(p), nil
	}
	return "", fmt.Errorf("path %q: want a drive path (C:\\…) or an absolute Linux path: %w", p, errdefs.ErrInvalidArgument)
}

// programPath is localPath for a program's name that is a drive path, and the name with
// slashes for one that is not (a name found through the working folder and PATH).
func programPath(name string) string {
	if p, err := localPath(name); err == nil && !strings.HasPrefix(name, "/") {
		return p
	}
	return strings.ReplaceAll(name, `\`, "/")
}

// pathList turns a PATH value into this machine's: a Windows list (";" between folders, or
// any backslash) has each folder mapped by localPath, those that name nothing here dropped,
// joined by ":"; a Linux list stays as it is.
func pathList(v string) string {
	if !strings.ContainsAny(v, `;\`) {
		return v
	}
	var out []string
	for _, d := range strings.Split(v, ";") {
		if d == "" {
			continue
		}
		if strings.HasPrefix(d, "/") {
			out = append(out, strings.Split(d, ":")...)
			continue
		}
		if p, err := localPath(d); err == nil {
			out = append(out, p)
		}
	}
	return strings.Join(out, ":")
}
