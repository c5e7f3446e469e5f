package wintest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The account functions of a HostProcess container's logon (internal/hostprocess Logon) that
// Wine 8 only pretends to have and hack/wine/wineaccount.c fills in. The tests hold for Windows
// too, run as SYSTEM or an administrator with the privilege to log service accounts on.

var (
	modNetapi32              = windows.NewLazySystemDLL("netapi32.dll")
	procNetLocalGroupGetInfo = modNetapi32.NewProc("NetLocalGroupGetInfo")
	modAdvapi32              = windows.NewLazySystemDLL("advapi32.dll")
	procLogonUserW           = modAdvapi32.NewProc("LogonUserW")
)

const (
	nerrGroupNotFound   = 2220 // lmerr.h: NERR_BASE + 120
	logon32LogonService = 5
	logon32Interactive  = 2
)

func localGroupGetInfo(name string) uintptr {
	var buf *byte
	r, _, _ := procNetLocalGroupGetInfo.Call(0, uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(name))), 1, uintptr(unsafe.Pointer(&buf)))
	if r == 0 {
		windows.NetApiBufferFree(buf)
	}
	return r
}

// TestLocalGroupGetInfo: a BUILTIN local group is found; a well-known account, a user and an
// unknown name are not groups (NERR_GroupNotFound). Wine 8 answered success for all.
func TestLocalGroupGetInfo(t *testing.T) {
	for _, g := range []string{"Administrators", "Users", `BUILTIN\Administrators`} {
		if r := localGroupGetInfo(g); r != 0 {
			t.Errorf("NetLocalGroupGetInfo(%q) = %d, want 0 (a local group)", g, r)
		}
	}
	for _, n := range []string{`NT AUTHORITY\SYSTEM`, `NT AUTHORITY\LOCAL SERVICE`, "runhcs-no-such-group"} {
		if r := localGroupGetInfo(n); r != nerrGroupNotFound {
			t.Errorf("NetLocalGroupGetInfo(%q) = %d, want NERR_GroupNotFound (%d)", n, r, nerrGroupNotFound)
		}
	}
}

func logonUser(user, domain string, logonType uint32) (windows.Token, error) {
	var tok windows.Token
	var dom *uint16
	if domain != "" {
		dom = windows.StringToUTF16Ptr(domain)
	}
	r, _, err := procLogonUserW.Call(uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(user))), uintptr(unsafe.Pointer(dom)), 0,
		uintptr(logonType), 0, uintptr(unsafe.Pointer(&tok)))
	if r == 0 {
		return 0, err
	}
	return tok, nil
}

// TestLogonServiceAccounts: LogonUserW with LOGON32_LOGON_SERVICE gives SYSTEM, LOCAL SERVICE
// and NETWORK SERVICE a primary token a process can be created with; an unknown account, or a
// service account with another logon type, fails. Wine 8 answered
// every logon with the token 0xdeadbeef, which is no handle.
func TestLogonServiceAccounts(t *testing.T) {
	for _, user := range []string{"SYSTEM", "LOCAL SERVICE", "NETWORK SERVICE"} {
		tok, err := logonUser(user, "NT AUTHORITY", logon32LogonService)
		if err != nil {
			t.Errorf("LogonUserW(NT AUTHORITY\\%s, service): %v", user, err)
			continue
		}
		cmd := exec.Command(`C:\windows\system32\cmd.exe`, "/c", "echo logged-on")
		cmd.SysProcAttr = &syscall.SysProcAttr{Token: syscall.Token(tok)}
		out, err := cmd.CombinedOutput()
		tok.Close()
		if err != nil || !strings.Contains(string(out), "logged-on") {
			t.Errorf("a process with NT AUTHORITY\\%s's token: %q, %v", user, out, err)
		}
	}
	for _, c := range []struct {
		user, domain string
		typ          uint32
	}{
		{"runhcs-no-such-user", ".", logon32Interactive},
		{"runhcs-no-such-user", "", logon32LogonService},
	} {
		if tok, err := logonUser(c.user, c.domain, c.typ); !errors.Is(err, windows.ERROR_LOGON_FAILURE) {
			if err == nil {
				tok.Close()
			}
			t.Errorf("LogonUserW(%q, %q, type %d) = %v, want ERROR_LOGON_FAILURE", c.user, c.domain, c.typ, err)
		}
	}
	// SYSTEM has no password to log on interactively with (the exact error is not documented).
	if tok, err := logonUser("SYSTEM", "NT AUTHORITY", logon32Interactive); err == nil {
		tok.Close()
		t.Error("LogonUserW(NT AUTHORITY\\SYSTEM, interactive) succeeded; want a failure")
	}
}

var (
	procNetUserAdd              = modNetapi32.NewProc("NetUserAdd")
	procNetUserDel              = modNetapi32.NewProc("NetUserDel")
	procNetUserGetInfo          = modNetapi32.NewProc("NetUserGetInfo")
	procNetLocalGroupAddMembers = modNetapi32.NewProc("NetLocalGroupAddMembers")
)

const (
	nerrUserNotFound  = 2221 // NERR_BASE + 121
	nerrGroupExists   = 2223
	nerrUserExists    = 2224
	errorMemberInAlis = 1378 // ERROR_MEMBER_IN_ALIAS
	userPrivUser      = 1
	userPrivAdmin     = 2
	userPrivParmnum   = 5
)

// userInfo1 is lmaccess.h's USER_INFO_1.
type userInfo1 struct {
	Name, Password *uint16
	PasswordAge    uint32
	Priv           uint32
	HomeDir        *uint16
	Comment        *uint16
	Flags          uint32
	ScriptPath     *uint16
}

func userAdd(name, password string, priv uint32) (uintptr, uint32) {
	ui := userInfo1{Name: windows.StringToUTF16Ptr(name), Password: windows.StringToUTF16Ptr(password), Priv: priv, Flags: 0x1 | 0x200}
	var parm uint32
	r, _, _ := procNetUserAdd.Call(0, 1, uintptr(unsafe.Pointer(&ui)), uintptr(unsafe.Pointer(&parm)))
	return r, parm
}

func userDel(name string) uintptr {
	r, _, _ := procNetUserDel.Call(0, uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(name))))
	return r
}

func userGetInfo0(name string) (string, uintptr) {
	var buf *byte
	r, _, _ := procNetUserGetInfo.Call(0, uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(name))), 0, uintptr(unsafe.Pointer(&buf)))
	if r != 0 {
		return "", r
	}
	defer windows.NetApiBufferFree(buf)
	return windows.UTF16PtrToString(*(**uint16)(unsafe.Pointer(buf))), 0
}

func addMember(group string, sid *windows.SID) uintptr {
	member := struct{ Sid *windows.SID }{sid}
	r, _, _ := procNetLocalGroupAddMembers.Call(0, uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(group))), 0, uintptr(unsafe.Pointer(&member)), 1)
	return r
}

func logonPassword(user, domain, password string) (windows.Token, error) {
	var tok windows.Token
	r, _, err := procLogonUserW.Call(uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(user))), uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(domain))),
		uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(password))), logon32Interactive, 0, uintptr(unsafe.Pointer(&tok)))
	if r == 0 {
		return 0, err
	}
	return tok, nil
}

// TestLocalAccounts: the temporary local account of a HostProcess container whose user is a
// local group, as Windows keeps it (hack/wine/wineaccount.c under Wine, whose NetUserAdd kept
// users in the calling process's memory only): NetUserAdd makes it once (NERR_UserExists the
// second time, NERR_GroupExists for a group's name, ERROR_INVALID_PARAMETER with
// USER_PRIV_PARMNUM for an administrator); another process finds it (NetUserGetInfo,
// LookupAccountNameW as a user); NetLocalGroupAddMembers adds it once to a local group
// (ERROR_MEMBER_IN_ALIAS the second time, NERR_GroupNotFound for no group); LogonUserW logs
// it on with its password only, and a process starts with the token; NetUserDel removes it,
// after which nothing finds it and the logon fails.
func TestLocalAccounts(t *testing.T) {
	name := fmt.Sprintf("rhcs-w%d", os.Getpid()%100000)
	const pw = "Pa55-word-for-the-test"
	if r, _ := userAdd(name, pw, userPrivUser); r != 0 {
		t.Fatalf("NetUserAdd(%s) = %d", name, r)
	}
	defer userDel(name)
	if r, _ := userAdd(name, pw, userPrivUser); r != nerrUserExists {
		t.Errorf("NetUserAdd(%s) again = %d, want NERR_UserExists (%d)", name, r, nerrUserExists)
	}
	if r, _ := userAdd("Users", pw, userPrivUser); r != nerrGroupExists {
		t.Errorf("NetUserAdd(Users) = %d, want NERR_GroupExists (%d)", r, nerrGroupExists)
	}
	if r, parm := userAdd(name+"a", pw, userPrivAdmin); r != uintptr(windows.ERROR_INVALID_PARAMETER) || parm != userPrivParmnum {
		t.Errorf("NetUserAdd with USER_PRIV_ADMIN = %d, parm_err %d; want ERROR_INVALID_PARAMETER, USER_PRIV_PARMNUM", r, parm)
	}
	// Another process finds it: a name only this process's memory held would not be found there.
	if got := accountInOtherProcess(t, name); got != "user" {
		t.Errorf("another process's NetUserGetInfo and LookupAccountNameW of %s: %q, want user", name, got)
	}
	if got, r := userGetInfo0(name); r != 0 || !strings.EqualFold(got, name) {
		t.Errorf("NetUserGetInfo(%s, 0) = %q, %d", name, got, r)
	}
	var sid *windows.SID
	for _, n := range []string{name, `.\` + name} {
		s, _, use, err := windows.LookupSID("", n)
		if err != nil || use != windows.SidTypeUser {
			t.Errorf("LookupSID(%s) = %v, type %d, %v; want a user", n, s, use, err)
		}
		sid = s
	}
	if sid == nil {
		t.FailNow()
	}
	if r := addMember("Users", sid); r != 0 {
		t.Errorf("NetLocalGroupAddMembers(Users, %s) = %d", name, r)
	}
	if r := addMember("Users", sid); r != errorMemberInAlis {
		t.Errorf("NetLocalGroupAddMembers(Users, %s) again = %d, want ERROR_MEMBER_IN_ALIAS (%d)", name, r, errorMemberInAlis)
	}
	if r := addMember("runhcs-no-such-group", sid); r != nerrGroupNotFound {
		t.Errorf("NetLocalGroupAddMembers(no such group) = %d, want NERR_GroupNotFound (%d)", r, nerrGroupNotFound)
	}
	tok, err := logonPassword(name, ".", pw)
	if err != nil {
		t.Fatalf("LogonUserW(%s, its password): %v", name, err)
	}
	cmd := exec.Command(`C:\windows\system32\cmd.exe`, "/c", "echo logged-on")
	cmd.SysProcAttr = &syscall.SysProcAttr{Token: syscall.Token(tok)}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "logged-on") {
		t.Errorf("a process with %s's token: %q, %v", name, out, err)
	}
	tok.Close()
	if tok, err := logonPassword(name, ".", "wrong"); !errors.Is(err, windows.ERROR_LOGON_FAILURE) {
		if err == nil {
			tok.Close()
		}
		t.Errorf("LogonUserW(%s, a wrong password) = %v, want ERROR_LOGON_FAILURE", name, err)
	}
	if r := userDel(name); r != 0 {
		t.Fatalf("NetUserDel(%s) = %d", name, r)
	}
	if r := userDel(name); r != nerrUserNotFound {
		t.Errorf("NetUserDel(%s) again = %d, want NERR_UserNotFound (%d)", name, r, nerrUserNotFound)
	}
	if _, r := userGetInfo0(name); r != nerrUserNotFound {
		t.Errorf("NetUserGetInfo(%s) after NetUserDel = %d, want NERR_UserNotFound (%d)", name, r, nerrUserNotFound)
	}
	if _, _, _, err := windows.LookupSID("", name); err == nil {
		t.Errorf("LookupSID(%s) after NetUserDel: found", name)
	}
	if tok, err := logonPassword(name, ".", pw); !errors.Is(err, windows.ERROR_LOGON_FAILURE) {
		if err == nil {
			tok.Close()
		}
		t.Errorf("LogonUserW(%s) after NetUserDel = %v, want ERROR_LOGON_FAILURE", name, err)
	}
	if got := accountInOtherProcess(t, name); got != "none" {
		t.Errorf("another process, after NetUserDel: %q, want none", got)
	}
}

// accountHelperEnv makes the test binary, started by accountInOtherProcess, say whether the
// account it names exists (findAccount).
const accountHelperEnv = "RUNHCS_WINTEST_ACCOUNT_HELPER"

// findAccount prints "user" if NetUserGetInfo and LookupAccountNameW both find the account
// name as a user, "none" if neither finds it, and what each said otherwise.
func findAccount(name string) int {
	_, r := userGetInfo0(name)
	_, _, use, err := windows.LookupSID("", name)
	switch {
	case r == 0 && err == nil && use == windows.SidTypeUser:
		fmt.Println("user")
	case r == nerrUserNotFound && err != nil:
		fmt.Println("none")
	default:
		fmt.Printf("NetUserGetInfo %d, LookupAccountNameW type %d, %v\n", r, use, err)
	}
	return 0
}

func accountInOtherProcess(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), accountHelperEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}
