package hostprocess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/internal/winlinux"
)

// newTestHost is the Linux host of a stand-in emulated host: a root of its own (HCSEMU_ROOT)
// whose host network namespace file is a new, empty network namespace, as hcsemu's daemon
// makes it (layout.HostNetns), and a folder of its own for the temporary accounts.
func newTestHost(t *testing.T) Host {
	t.Helper()
	testenv.RequireRoot(t, "cgroups, network namespaces and mounts")
	root := t.TempDir()
	ns := layout.HostNetns(root)
	if err := os.MkdirAll(filepath.Dir(ns), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ns, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, in the new namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), ns, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatalf("make a network namespace at %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ns, unix.MNT_DETACH) })
	t.Setenv(layout.RootEnv, root)
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	h.(*linuxHost).accounts = filepath.Join(root, "accounts")
	return h
}

func helperExe(t *testing.T) (exe, dir string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err = os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return exe, dir
}

// sharedHelper is a copy of the test binary that every account may run, in a folder every
// account may enter (go test's own folders are root's alone).
func sharedHelper(t *testing.T) (exe, dir string) {
	t.Helper()
	self, _ := helperExe(t)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe = filepath.Join(dir, "helper")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, dir
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// procIDs is the real uid and gid of a process (/proc/PID/status).
func procIDs(t *testing.T, pid uint32) (uid, gid uint32) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if k == "Uid" || k == "Gid" {
			n, _ := strconv.ParseUint(strings.Fields(v)[0], 10, 32)
			if k == "Uid" {
				uid = uint32(n)
			} else {
				gid = uint32(n)
			}
		}
	}
	return uid, gid
}

// TestLinuxJob: a job is a cgroup with the limits in hcsemu's mapping (a CPU count as cfs
// quota, a weight as cpu.shares, memory.limit_in_bytes) that changes and clears; its process
// is born in the group and in the emulated host's network namespace, with the machine's mount
// and PID namespaces; its accounting moves; Terminate ends every process; Close removes the
// group.
func TestLinuxJob(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	id := fmt.Sprintf("runhcs-linux-%d", os.Getpid())
	job, err := h.CreateJob(ctx, id, Limits{CPUCount: 1, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.TerminateJob(ctx, id) })
	g := JobGroup(id)
	if got := g.ReadUint("cpu", "cpu.cfs_quota_us"); got != 100000 {
		t.Errorf("cfs quota %d, want one CPU (100000)", got)
	}
	if got := g.ReadUint("memory", "memory.limit_in_bytes"); got != 256<<20 {
		t.Errorf("memory limit %d, want %d", got, 256<<20)
	}
	if _, err := h.CreateJob(ctx, id, Limits{}); !errdefs.IsAlreadyExists(err) || !strings.Contains(err.Error(), JobName(id)) {
		t.Errorf("a second job of the same name: %v, want already exists naming it", err)
	}
	if err := job.SetLimits(ctx, Limits{CPUWeight: 300}); err != nil {
		t.Fatal(err)
	}
	// No quota reads -1; memory's no limit is the kernel's largest page-aligned number.
	q, _ := g.Read("cpu", "cpu.cfs_quota_us")
	if s, m := g.ReadUint("cpu", "cpu.shares"), g.ReadUint("memory", "memory.limit_in_bytes"); q != "-1" || s != 300 || m < 1<<40 {
		t.Errorf("after SetLimits(weight 300): quota %s, shares %d, memory %d; want -1, 300, no limit", q, s, m)
	}
	before, err := job.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}

	tok, err := h.Logon(ctx, "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	exe, dir := helperExe(t)
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
		Env: []string{"RUNHCS_HOSTPROCESS_HELPER=linux", MountPointVariable + `=C:\hpc\x\`}, Token: tok, Stdin: true, Stdout: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close()
	in, out, _ := p.Stdio()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "helper:linux:C:\\hpc\\x\\\n" {
		t.Errorf("output %q, %v", line, err)
	}
	pid := p.Pid()
	netns := layout.HostNetns(os.Getenv(layout.RootEnv))
	if got, want := inode(t, fmt.Sprintf("/proc/%d/ns/net", pid)), inode(t, netns); got != want {
		t.Errorf("process's network namespace %d, want the emulated host's %d (%s)", got, want, netns)
	}
	for _, ns := range []string{"mnt", "pid"} {
		if got, want := inode(t, fmt.Sprintf("/proc/%d/ns/%s", pid, ns)), inode(t, "/proc/self/ns/"+ns); got != want {
			t.Errorf("process's %s namespace %d, want the machine's (the shim's) %d", ns, got, want)
		}
	}
	cg, err := readCgroups(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range jobControllers {
		if want := "/" + g.Path; cg[c] != want {
			t.Errorf("process's %s group %q, want %q", c, cg[c], want)
		}
	}
	if pids, err := job.Pids(ctx); err != nil || !slices.Contains(pids, pid) {
		t.Errorf("Pids = %v, %v; want %d among them", pids, err, pid)
	}
	after, err := job.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Processor.TotalRuntime100ns <= before.Processor.TotalRuntime100ns || after.Memory.MemoryUsageCommitBytes == 0 {
		t.Errorf("stats did not move: processor %d → %d (100ns), memory %d bytes", before.Processor.TotalRuntime100ns, after.Processor.TotalRuntime100ns, after.Memory.MemoryUsageCommitBytes)
	}
	_ = in.Close()
	<-p.Exited()
	if code, err := p.ExitCode(); err != nil || code != 3 {
		t.Errorf("exit code %d, %v; want 3", code, err)
	}

	// Two more processes, one a child of the other's kind, end with Terminate.
	var ps []Process
	for i := range 2 {
		q, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
			Env: []string{fmt.Sprintf("RUNHCS_HOSTPROCESS_HELPER=t%d", i)}, Token: tok, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ps = append(ps, q)
	}
	if err := job.Terminate(ctx); err != nil {
		t.Fatalf("Terminate: %v", err)
	}
	for _, q := range ps {
		<-q.Exited()
		if code, _ := q.ExitCode(); code != winlinux.ExitCodeTerminated {
			t.Errorf("exit code after Terminate %d, want 1", code)
		}
	}
	if pids, _ := job.Pids(ctx); len(pids) != 0 {
		t.Errorf("Pids after Terminate = %v", pids)
	}
	if err := job.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range jobControllers {
		if g.Exists(c) {
			t.Errorf("group %s left after Close", g.Dir(c))
		}
	}
	if _, err := job.Stats(ctx); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Stats after Close: %v, want failed precondition", err)
	}
}

func readCgroups(pid uint32) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			for _, c := range strings.Split(parts[1], ",") {
				m[c] = parts[2]
			}
		}
	}
	return m, nil
}

// TestLinuxTerminateJobOfAnotherHost: the delete action after a killed shim (a new Host)
// finds the job by its name, ends its processes and removes its group; the first Host's Job
// then closes as done; no such job is done.
func TestLinuxTerminateJobOfAnotherHost(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	id := fmt.Sprintf("runhcs-other-%d", os.Getpid())
	job, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := h.Logon(ctx, "", "", true)
	exe, dir := helperExe(t)
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
		Env: []string{"RUNHCS_HOSTPROCESS_HELPER=other"}, Token: tok, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h2, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.TerminateJob(ctx, id); err != nil {
		t.Fatalf("TerminateJob from another host: %v", err)
	}
	<-p.Exited()
	if code, _ := p.ExitCode(); code != winlinux.ExitCodeTerminated {
		t.Errorf("exit code %d, want 1", code)
	}
	for _, c := range jobControllers {
		if JobGroup(id).Exists(c) {
			t.Errorf("group %s left after TerminateJob", JobGroup(id).Dir(c))
		}
	}
	if err := job.Close(); err != nil {
		t.Errorf("Close after TerminateJob: %v", err)
	}
	if err := h2.TerminateJob(ctx, id); err != nil {
		t.Errorf("TerminateJob of a gone job: %v", err)
	}
}

// TestLinuxTerminalAndSignals: a process with a terminal sees its size and a resize; CtrlC is
// SIGINT and the default handler's end is STATUS_CONTROL_C_EXIT, as hcsemu's processes;
// Kill's exit code is 1; the first word is found on the image-style PATH (Windows list) with
// .exe tried as on Windows.
func TestLinuxTerminalAndSignals(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	id := fmt.Sprintf("runhcs-tty-%d", os.Getpid())
	job, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	tok, _ := h.Logon(ctx, "", "", true)
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: `sh -c "stty size; read x; stty size"`, Dir: `C:\`,
		Env: []string{`PATH=C:\usr\bin;C:\bin`}, Token: tok, Terminal: true, Width: 100, Height: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in, out, _ := p.Stdio()
	r := bufio.NewReader(out)
	if l, err := r.ReadString('\n'); err != nil || strings.TrimSpace(l) != "30 100" {
		t.Errorf("first size %q, %v; want 30 100", l, err)
	}
	if err := p.ResizeConsole(ctx, 120, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		l, err := r.ReadString('\n')
		if s := strings.TrimSpace(l); s != "" {
			got = append(got, s)
		}
		if err != nil {
			break
		}
	}
	if !slices.Contains(got, "40 120") {
		t.Errorf("output after the resize %q, want 40 120", got)
	}
	<-p.Exited()
	if code, _ := p.ExitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}

	exe, dir := helperExe(t)
	for _, tc := range []struct {
		name string
		do   func(Process) (bool, error)
		code int
	}{
		{"CtrlC", func(p Process) (bool, error) {
			return p.Signal(ctx, &schema2.SignalProcessOptions{Signal: schema2.SignalCtrlC})
		}, winlinux.ExitCodeCtrlC},
		{"CtrlShutdown", func(p Process) (bool, error) {
			return p.Signal(ctx, &schema2.SignalProcessOptions{Signal: schema2.SignalCtrlShutdown})
		}, winlinux.ExitCodeCtrlC},
		{"Kill", func(p Process) (bool, error) { return p.Kill(ctx) }, winlinux.ExitCodeTerminated},
	} {
		p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
			Env: []string{"RUNHCS_HOSTPROCESS_HELPER=" + tc.name}, Token: tok, Stdin: true, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		_, out, _ := p.Stdio()
		_, _ = bufio.NewReader(out).ReadString('\n') // running
		if ok, err := tc.do(p); !ok || err != nil {
			t.Errorf("%s: delivered %v, %v", tc.name, ok, err)
		}
		<-p.Exited()
		if code, _ := p.ExitCode(); code != tc.code {
			t.Errorf("%s: exit code %#x, want %#x", tc.name, code, tc.code)
		}
		if ok, err := tc.do(p); ok || err != nil {
			t.Errorf("%s after exit: delivered %v, %v; want not delivered, no error", tc.name, ok, err)
		}
		p.Close()
	}
	if _, err := job.Start(ctx, &ProcessSpec{CommandLine: `runhcs-no-such-program`, Dir: dir, Token: tok}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "runhcs-no-such-program") {
		t.Errorf("a program that is nowhere: %v, want not found naming it", err)
	}
}

// TestLinuxAccounts: the service accounts run as hcsemu's uids for them (SYSTEM 18 in group 0,
// LOCAL SERVICE 19 and NETWORK SERVICE 20 in BUILTIN\Users' 545); a local group's temporary
// account gets a uid of its own in the group's gid, exists until DeleteAccount (a second of
// the name is refused), after which nothing of it is left; inherit is the shim's identity; an
// unknown name is refused naming it.
func TestLinuxAccounts(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	lh := h.(*linuxHost)
	exe, dir := sharedHelper(t)
	account := fmt.Sprintf("rhcs-t%d", os.Getpid()%100000)
	defer func() { _ = h.DeleteAccount(ctx, account) }()
	for i, tc := range []struct {
		user, account string
		inherit       bool
		uid, gid      uint32 // uid 0 with a temporary account: any of the range
	}{
		{`NT AUTHORITY\SYSTEM`, "", false, 18, 0},
		{`NT AUTHORITY\LOCAL SERVICE`, "", false, 19, 545},
		{`nt authority\network service`, "", false, 20, 545},
		{"Users", account, false, 0, 545},
		{"", "", true, uint32(os.Getuid()), uint32(os.Getgid())},
	} {
		tok, err := h.Logon(ctx, tc.user, tc.account, tc.inherit)
		if err != nil {
			t.Errorf("Logon %q: %v", tc.user, err)
			continue
		}
		job, err := h.CreateJob(ctx, fmt.Sprintf("runhcs-acct-%d-%d", os.Getpid(), i), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
			Env: []string{"RUNHCS_HOSTPROCESS_HELPER=acct"}, Token: tok, Stdin: true, Stdout: true})
		if err != nil {
			t.Errorf("Start as %q: %v", tc.user, err)
		} else {
			in, out, _ := p.Stdio()
			_, _ = bufio.NewReader(out).ReadString('\n')
			uid, gid := procIDs(t, p.Pid())
			wantUID := tc.uid
			if tc.account != "" {
				if uid < tempUIDBase || uid >= tempUIDBase+tempUIDCount {
					t.Errorf("temporary account's uid %d, want one of [%d, %d)", uid, tempUIDBase, tempUIDBase+tempUIDCount)
				}
				wantUID = uid
			}
			if uid != wantUID || gid != tc.gid {
				t.Errorf("as %q: uid %d gid %d, want %d %d", tc.user, uid, gid, wantUID, tc.gid)
			}
			_ = in.Close()
			<-p.Exited()
			p.Close()
		}
		job.Close()
		tok.Close()
	}
	if _, err := os.Stat(filepath.Join(lh.accounts, account)); err != nil {
		t.Errorf("the temporary account's record: %v", err)
	}
	if _, err := h.Logon(ctx, "Users", account, false); !errdefs.IsAlreadyExists(err) || !strings.Contains(err.Error(), account) {
		t.Errorf("a second temporary account of the same name: %v, want already exists naming it", err)
	}
	if err := h.DeleteAccount(ctx, account); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(lh.accounts); len(entries) != 0 {
		t.Errorf("left after DeleteAccount: %v", entries)
	}
	if err := h.DeleteAccount(ctx, account); err != nil {
		t.Errorf("DeleteAccount of a deleted account: %v", err)
	}
	for _, bad := range []string{"runhcs-no-such-group", `NT AUTHORITY\ContainerUser`, "ContainerAdministrator"} {
		if _, err := h.Logon(ctx, bad, account, false); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("Logon %q: %v, want an error naming it", bad, err)
		}
	}
}

// TestLinuxBind: Bind makes a folder (read-only when asked) and a single file appear at a
// Windows path of the emulated host (C:\ is the machine's root); Unbind removes the binding
// and the folder it made, and a second Unbind is done.
func TestLinuxBind(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "image.txt"), []byte("from the image"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	win := func(p string) string { return "C:" + strings.ReplaceAll(p, "/", `\`) }
	at := filepath.Join(base, "hpc", "c1")
	if err := h.Bind(ctx, win(at)+`\`, src, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(at, "image.txt")); err != nil || string(b) != "from the image" {
		t.Errorf("read through the binding: %q, %v", b, err)
	}
	ro := filepath.Join(at, "ro")
	if err := h.Bind(ctx, win(ro), src, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write in a read-only binding: %v, want EROFS", err)
	}
	file := filepath.Join(at, "dev", "termination-log")
	if err := h.Bind(ctx, win(file), filepath.Join(src, "image.txt"), false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "from the image" {
		t.Errorf("read a bound file: %q, %v", b, err)
	}
	for _, p := range []string{file, ro, at} {
		if err := h.Unbind(ctx, win(p)); err != nil {
			t.Fatalf("Unbind %s: %v", p, err)
		}
		if mounted(t, p) {
			t.Errorf("%s still mounted after Unbind", p)
		}
	}
	if _, err := os.Stat(at); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point %s after Unbind: %v, want gone", at, err)
	}
	if err := h.Unbind(ctx, win(at)); err != nil {
		t.Errorf("a second Unbind: %v", err)
	}
	if err := h.Bind(ctx, `\\server\share\x`, src, false); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), fmt.Sprintf("%q", `\\server\share\x`)) {
		t.Errorf("Bind at a UNC path: %v, want invalid argument naming it", err)
	}
}

func mounted(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}

// TestLocalPath: drive paths of the emulated host are below the machine's root.
func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		`C:\hpc\c1\`:        "/hpc/c1",
		`c:/tmp/x`:          "/tmp/x",
		`\\?\C:\hpc\c1\bin`: "/hpc/c1/bin",
		`C:\..\..\etc`:      "/etc",
		`/var/lib/x`:        "/var/lib/x",
	} {
		if got, err := localPath(in); err != nil || got != want {
			t.Errorf("localPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`relative\x`, `\\server\share`, `\\?\Volume{0badf00d-0000-0000-0000-000000000000}\x`} {
		if _, err := localPath(bad); !errdefs.IsInvalidArgument(err) {
			t.Errorf("localPath(%q): %v, want invalid argument", bad, err)
		}
	}
	if got := pathList(`C:\Windows\System32;C:\workload;;/usr/bin:/bin`); got != "/Windows/System32:/workload:/usr/bin:/bin" {
		t.Errorf("pathList = %q", got)
	}
	if got := pathList("/usr/bin:/bin"); got != "/usr/bin:/bin" {
		t.Errorf("pathList of a Linux list = %q", got)
	}
}

// TestLinuxNoDaemon: without the emulated host's network namespace (hcsemu gone, or another
// root), the host still ends jobs, bindings and accounts, as the delete action needs, and a
// process's start fails naming the namespace and $HCSEMU_ROOT.
func TestLinuxNoDaemon(t *testing.T) {
	ctx := context.Background()
	testenv.RequireRoot(t, "cgroups")
	root := t.TempDir()
	t.Setenv(layout.RootEnv, root)
	h, err := New()
	if err != nil {
		t.Fatalf("New without a daemon: %v", err)
	}
	id := fmt.Sprintf("runhcs-nodaemon-%d", os.Getpid())
	job, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	tok, _ := h.Logon(ctx, "", "", true)
	exe, dir := helperExe(t)
	_, err = job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `"`, Dir: dir, Token: tok})
	if err == nil || !strings.Contains(err.Error(), layout.HostNetns(root)) || !strings.Contains(err.Error(), layout.RootEnv) {
		t.Errorf("Start without the host's namespace: %v, want an error naming %s and $%s", err, layout.HostNetns(root), layout.RootEnv)
	}
	if err := h.TerminateJob(ctx, id); err != nil {
		t.Errorf("TerminateJob: %v", err)
	}
	if JobGroup(id).Exists("freezer") {
		t.Errorf("the job's group after TerminateJob")
	}
}

// platformHelper lets the test binary play a job's creator: with RUNHCS_HOSTPROCESS_CREATOR
// set to a container id it creates that job on the Linux host of $HCSEMU_ROOT (the test's,
// inherited), starts `sleep 600` in it (stdio on /dev/null: nothing of it ends with the
// creator but through the job), prints "started <pid>" and waits to be killed.
func platformHelper() (code int, ok bool) {
	id, ok := os.LookupEnv("RUNHCS_HOSTPROCESS_CREATOR")
	if !ok {
		return 0, false
	}
	ctx := context.Background()
	fail := func(err error) (int, bool) {
		fmt.Fprintln(os.Stderr, "creator:", err)
		return 2, true
	}
	h, err := New()
	if err != nil {
		return fail(err)
	}
	job, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		return fail(err)
	}
	tok, _ := h.Logon(ctx, "", "", true)
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: "sleep 600", Dir: `C:\`, Env: []string{`PATH=C:\usr\bin;C:\bin`}, Token: tok})
	if err != nil {
		return fail(err)
	}
	fmt.Printf("started %d\n", p.Pid())
	time.Sleep(10 * time.Minute)
	return 0, true
}

// gone reports whether process pid has ended: no such process, or a zombie (whoever inherited
// it has not reaped it yet; it runs nothing and holds nothing).
func gone(pid int) bool {
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(string(st[i+1:])), "Z") {
			return true
		}
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// keeperOf finds the keeper process of group g (argv[0] KeeperName, then the group's path).
func keeperOf(g string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && args[0] == KeeperName && args[1] == g && !gone(pid) {
			return pid
		}
	}
	return 0
}

var jobSeq int

// uniqueID is a container id of its own for each run of a test (go test -count=N).
func uniqueID(prefix string) string {
	jobSeq++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), jobSeq)
}

// TestLinuxJobEndsWithItsCreator: a job ends with the process that created it, however it
// dies, as a job object with KILL_ON_JOB_CLOSE does with its last handle: the creator (this
// test binary re-executed) is SIGKILLed and, with no delete action, the job's process is gone
// and its group removed within a bound. The keeper that does it is in none of the job's
// groups, and exits too.
func TestLinuxJobEndsWithItsCreator(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t) // the creator inherits its $HCSEMU_ROOT
	id := uniqueID("runhcs-creator")
	g := JobGroup(id)
	t.Cleanup(func() { _ = h.TerminateJob(ctx, id) })
	exe, dir := helperExe(t)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUNHCS_HOSTPROCESS_CREATOR="+id)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "started %d\n", &pid); err != nil || serr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the creator: %q, %v; stderr %q", line, err, stderr.String())
	}
	if !slices.Contains(g.Pids(), pid) {
		t.Errorf("the job's processes %v, want %d among them", g.Pids(), pid)
	}
	keeper := keeperOf(g.Path)
	if keeper == 0 {
		t.Errorf("no keeper process (argv[0] %s) for %s", KeeperName, g.Path)
	} else {
		cg, err := readCgroups(uint32(keeper))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range jobControllers {
			if cg[c] == "/"+g.Path {
				t.Errorf("the keeper %d is in the job's %s group", keeper, c)
			}
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	const bound = 10 * time.Second
	deadline := time.Now().Add(bound)
	for {
		var left []string
		if !gone(pid) {
			left = append(left, fmt.Sprintf("the job's process %d", pid))
		}
		if keeper != 0 && !gone(keeper) {
			left = append(left, fmt.Sprintf("the keeper %d", keeper))
		}
		for _, c := range jobControllers {
			if g.Exists(c) {
				left = append(left, "the group "+g.Dir(c))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the creator was killed: %v", bound, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLinuxKeeperLeavesANewJob: the keeper of an old job whose group a delete action removed,
// and a new job of the same name made again, does not end the new job when its creator goes
// (its pipe closes without Close's word): it exits, and the new job's process runs on.
func TestLinuxKeeperLeavesANewJob(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	id := uniqueID("runhcs-reused")
	t.Cleanup(func() { _ = h.TerminateJob(ctx, id) })
	old, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	oldJob := old.(*linuxJob)
	// The delete action after the old creator's death, from a host of its own.
	other, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.TerminateJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	job, err := h.CreateJob(ctx, id, Limits{})
	if err != nil {
		t.Fatalf("a new job of the same name: %v", err)
	}
	defer job.Close()
	tok, _ := h.Logon(ctx, "", "", true)
	p, err := job.Start(ctx, &ProcessSpec{CommandLine: "sleep 600", Dir: `C:\`, Env: []string{`PATH=C:\usr\bin;C:\bin`}, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// The old creator's end of the pipe closes as its death would close it. The old Job is
	// never closed: its Close would end the group of its name, which is the new job's now.
	oldJob.mu.Lock()
	oldJob.closed = true
	oldJob.mu.Unlock()
	if err := unix.Close(oldJob.keeper.w); err != nil {
		t.Fatal(err)
	}
	select {
	case <-oldJob.keeper.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old keeper %d has not exited 10s after its pipe closed", oldJob.keeper.pid)
	}
	select {
	case <-p.Exited():
		code, _ := p.ExitCode()
		t.Fatalf("the new job's process exited (code %d) when the old job's keeper ended", code)
	default:
	}
	g := JobGroup(id)
	for _, c := range jobControllers {
		if !g.Exists(c) {
			t.Errorf("the new job's group %s gone after the old keeper ended", g.Dir(c))
		}
	}
	if pids, _ := job.Pids(ctx); !slices.Contains(pids, p.Pid()) {
		t.Errorf("the new job's processes %v, want %d among them", pids, p.Pid())
	}
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if keeper := keeperOf(g.Path); keeper != 0 {
		t.Errorf("a keeper (%d) of %s left after Close", keeper, g.Path)
	}
}

// TestLinuxCreateJobNeedsReexec: a program that did not call Reexec first cannot create a job
// (its keeper would be a second copy of the program): a clear error, and no group.
func TestLinuxCreateJobNeedsReexec(t *testing.T) {
	h := newTestHost(t)
	reexecCalled.Store(false)
	defer reexecCalled.Store(true)
	id := uniqueID("runhcs-noreexec")
	if _, err := h.CreateJob(context.Background(), id, Limits{}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "hostprocess.Reexec") {
		t.Errorf("CreateJob without Reexec: %v, want failed precondition naming hostprocess.Reexec", err)
	}
	if JobGroup(id).Exists("freezer") {
		t.Errorf("a group %s made without Reexec", JobGroup(id).Dir("freezer"))
		_ = h.TerminateJob(context.Background(), id)
	}
}
