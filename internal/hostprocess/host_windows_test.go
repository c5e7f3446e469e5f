package hostprocess

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// newTestHost is the Windows host (under Wine in make test-windows).
func newTestHost(t *testing.T) Host {
	t.Helper()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLogonServiceAccounts: a HostProcess container's process runs as NT AUTHORITY\SYSTEM,
// LOCAL SERVICE or NETWORK SERVICE through Logon (a service logon, no temporary account), and
// an account that does not exist is refused naming it. Under Wine every service account is
// Wine's one user (hack/wine/wineaccount.c); the logon and the process's start are what is
// checked.
func TestLogonServiceAccounts(t *testing.T) {
	ctx := context.Background()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	for i, user := range []string{`NT AUTHORITY\SYSTEM`, `NT AUTHORITY\LOCAL SERVICE`, `NT AUTHORITY\NETWORK SERVICE`} {
		tok, err := h.Logon(ctx, user, "", false)
		if err != nil {
			t.Errorf("Logon %s: %v", user, err)
			continue
		}
		job, err := h.CreateJob(ctx, fmt.Sprintf("runhcs-logon-%d-%d", os.Getpid(), i), Limits{})
		if err != nil {
			tok.Close()
			t.Fatalf("CreateJob: %v", err)
		}
		p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
			Env: []string{"RUNHCS_HOSTPROCESS_HELPER=" + user}, Token: tok, Stdout: true})
		if err != nil {
			t.Errorf("Start as %s: %v", user, err)
		} else {
			_, out, _ := p.Stdio()
			b, _ := io.ReadAll(out)
			<-p.Exited()
			if code, _ := p.ExitCode(); code != 3 || !strings.Contains(string(b), "helper:"+user) {
				t.Errorf("as %s: output %q, exit code %d", user, b, code)
			}
			p.Close()
		}
		job.Close()
		tok.Close()
	}
	if _, err := h.Logon(ctx, `runhcs-no-such-account`, "", false); err == nil || !strings.Contains(err.Error(), "runhcs-no-such-account") {
		t.Errorf("Logon of an unknown account: %v, want an error naming it", err)
	}
}

// TestLogonGroupMember: a HostProcess user that is a local group ("Users") logs on as a
// temporary local account made for it, a member of the group (hcsshim's makeLocalAccount); a
// process starts with its token; DeleteAccount removes the account, after which it neither
// logs on nor is found, and a second DeleteAccount is done. A name that is neither an account
// nor a group is refused naming it. Under Wine the accounts are hack/wine/wineaccount.c's.
func TestLogonGroupMember(t *testing.T) {
	ctx := context.Background()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	account := fmt.Sprintf("rhcs-t%d", os.Getpid()%100000)
	tok, err := h.Logon(ctx, "Users", account, false)
	if err != nil {
		t.Fatalf("Logon Users as %s: %v", account, err)
	}
	defer func() { _ = h.DeleteAccount(ctx, account) }()
	sid, _, use, err := windows.LookupSID("", account)
	if err != nil || use != windows.SidTypeUser {
		t.Errorf("LookupSID(%s) = %v, type %d, %v; want a user", account, sid, use, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	job, err := h.CreateJob(ctx, fmt.Sprintf("runhcs-group-%d", os.Getpid()), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
		Env: []string{"RUNHCS_HOSTPROCESS_HELPER=group"}, Token: tok, Stdout: true})
	if err != nil {
		t.Errorf("Start as %s: %v", account, err)
	} else {
		_, out, _ := p.Stdio()
		b, _ := io.ReadAll(out)
		<-p.Exited()
		if code, _ := p.ExitCode(); code != 3 || !strings.Contains(string(b), "helper:group") {
			t.Errorf("as %s: output %q, exit code %d", account, b, code)
		}
		p.Close()
	}
	job.Close()
	tok.Close()
	if _, err := h.Logon(ctx, "Users", account, false); err == nil || !strings.Contains(err.Error(), account) {
		t.Errorf("a second temporary account of the same name: %v, want an error naming it", err)
	}
	if err := h.DeleteAccount(ctx, account); err != nil {
		t.Fatalf("DeleteAccount: %v", err)
	}
	if _, _, _, err := windows.LookupSID("", account); err == nil {
		t.Errorf("LookupSID(%s) after DeleteAccount: found", account)
	}
	if err := h.DeleteAccount(ctx, account); err != nil {
		t.Errorf("DeleteAccount of a deleted account: %v, want done", err)
	}
	if _, err := h.Logon(ctx, "runhcs-no-such-group", account, false); err == nil || !strings.Contains(err.Error(), "runhcs-no-such-group") {
		t.Errorf("Logon of a name that is no account nor group: %v, want an error naming it", err)
	}
}

// TestDrivePath: a path below a volume that has a drive letter becomes the drive's path, so
// that a single file given as a volume path can be bound (see drivePath); a volume's root, a
// volume without a drive and a drive path stay as they are.
func TestDrivePath(t *testing.T) {
	var vol [260]uint16
	if err := windows.GetVolumeNameForVolumeMountPoint(windows.StringToUTF16Ptr(`C:\`), &vol[0], uint32(len(vol))); err != nil {
		t.Fatalf("the volume of C:: %v", err)
	}
	c := windows.UTF16ToString(vol[:]) // \\?\Volume{GUID}\
	for in, want := range map[string]string{
		c + `var\lib\kubelet\termination-log`: `C:\var\lib\kubelet\termination-log`,
		c:                                     c,
		`C:\var\log`:                          `C:\var\log`,
		`\\?\Volume{0badf00d-0000-0000-0000-000000000000}\x`: `\\?\Volume{0badf00d-0000-0000-0000-000000000000}\x`,
	} {
		if got := drivePath(in); got != want {
			t.Errorf("drivePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// signalInShimEnv runs TestJobProcessSignal's body in a process started as the serving shim is.
const signalInShimEnv = "RUNHCS_HOSTPROCESS_SIGNAL_AS_SHIM"

// TestJobProcessSignal: Signal delivers the console control events a stop sends to a job's
// process (SIGINT: CTRL_C_EVENT; SIGTERM, a shutdown: CTRL_BREAK_EVENT), which the process
// handles and exits on with its own code. The signalling process is started as the shim's start
// action starts the serving shim (internal/shim start_windows.go: CREATE_NEW_PROCESS_GROUP |
// DETACHED_PROCESS), whose CTRL+C state the job's processes inherit: in the test process itself
// both events arrived even before prepareConsoleControl, in the shim neither did.
func TestJobProcessSignal(t *testing.T) {
	if os.Getenv(signalInShimEnv) == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestJobProcessSignal$", "-test.v", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), signalInShimEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test in a process started as the shim is: %v\n%s", err, out)
		}
		t.Logf("the test in a process started as the shim is:\n%s", out)
		return
	}
	ctx := context.Background()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.Logon(ctx, `NT AUTHORITY\SYSTEM`, "", false)
	if err != nil {
		t.Fatalf("Logon (SYSTEM): %v", err)
	}
	defer tok.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	for _, sig := range []schema2.ProcessSignal{schema2.SignalCtrlC, schema2.SignalCtrlShutdown} {
		t.Run(string(sig), func(t *testing.T) {
			id := fmt.Sprintf("runhcs-test-%d-%s", os.Getpid(), sig)
			job, err := h.CreateJob(ctx, id, Limits{})
			if err != nil {
				t.Fatalf("CreateJob: %v", err)
			}
			defer job.Close()
			p, err := job.Start(ctx, &ProcessSpec{
				CommandLine: `"` + exe + `" -test.run=^$`,
				Dir:         dir,
				Env:         []string{"RUNHCS_HOSTPROCESS_HELPER=signal"},
				Token:       tok,
				Stdout:      true,
				Stderr:      true,
			})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer p.Close()
			_, out, _ := p.Stdio()
			r := bufio.NewReader(out)
			if line, err := r.ReadString('\n'); strings.TrimSpace(line) != "waiting" {
				t.Fatalf("the process: %q, %v", line, err)
			}
			delivered, err := p.Signal(ctx, &schema2.SignalProcessOptions{Signal: sig})
			if err != nil || !delivered {
				t.Fatalf("Signal(%s) = %v, %v; want delivered", sig, delivered, err)
			}
			if line, err := r.ReadString('\n'); strings.TrimSpace(line) != "got interrupt" {
				t.Errorf("after Signal(%s) the process says %q, %v; want got interrupt", sig, line, err)
			}
			<-p.Exited()
			if code, err := p.ExitCode(); code != 5 || err != nil {
				t.Errorf("exit code %d, %v; want 5, its own", code, err)
			}
		})
	}
}

// platformHelper: the Windows build's helpers are all in TestMain.
func platformHelper() (code int, ok bool) { return 0, false }
