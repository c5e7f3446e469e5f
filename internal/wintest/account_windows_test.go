package wintest

import (
	"errors"
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
