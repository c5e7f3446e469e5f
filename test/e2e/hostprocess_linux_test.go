package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/test/harness"
)

// winPath is the emulated host's name of a path of this machine (its drives are the
// machine's root: internal/hostprocess localPath).
func winPath(p string) string { return `C:` + strings.ReplaceAll(p, "/", `\`) }

// TestHostProcess runs a HostProcess pod in the Linux-native mode (issue 24) as containerd's
// CRI would make it (the hostprocess annotation on the sandbox and the container): the
// container's process runs in the emulated host's network namespace, as NT AUTHORITY\SYSTEM,
// finds its image's files at %CONTAINER_SANDBOX_MOUNT_POINT% (the pod's rootfs location, a
// folder of this test's root), writes a host path, has its job's limits and stats; after
// delete no cgroup, binding, temporary account, keeper or process of it is left. A second
// container runs as the local group Users (a temporary account) and leaves nothing either. A
// third one's shim is killed: its job ends with the shim, before containerd's delete action.
func TestHostProcess(t *testing.T) {
	// The pod's files and the host folder it writes are in a folder every account may enter,
	// as C:\hpc is on Windows (the harness's root is root's alone, and an account's process
	// finds its program through the path before its capabilities apply). Removed after the
	// harness's own cleanup (cleanups run last first), without following a binding left behind.
	base, err := os.MkdirTemp("", "runhcs-e2e-hostprocess-")
	if err != nil {
		t.Fatal(err)
	}
	rootfs, hostDir := filepath.Join(base, "hpc"), filepath.Join(base, "host-files")
	t.Cleanup(func() {
		_ = os.RemoveAll(hostDir)
		_ = os.Remove(rootfs)
		_ = os.Remove(base)
	})
	for _, d := range []string{base, hostDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	const pod, id, groupID = "hp-pod", "hp-ctr", "hp-ctr-users"
	inPodOf := func(pod, kind string) oci.SpecOpts {
		return oci.WithAnnotations(map[string]string{
			"io.kubernetes.cri.sandbox-id":              pod,
			"io.kubernetes.cri.container-type":          kind,
			"microsoft.com/hostprocess-container":       "true",
			"microsoft.com/hostprocess-rootfs-location": winPath(rootfs),
		})
	}
	inPod := func(kind string) oci.SpecOpts { return inPodOf(pod, kind) }
	limits := func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		mem, count := uint64(256<<20), uint64(1)
		s.Windows.Resources = &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &mem}, CPU: &specs.WindowsCPUResources{Count: &count}}
		return nil
	}
	sandbox, err := env.StartTask(ctx, t, harness.TaskRun{ID: pod, SpecOpts: []oci.SpecOpts{inPod("sandbox")}})
	if err != nil {
		t.Fatalf("HostProcess sandbox: %v", err)
	}
	// Its pid is 0: the harness would not kill it. The cleanup runs after ctx's cancel.
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(harness.Context(context.Background()), time.Minute)
		defer ccancel()
		deleteTask(cctx, t, sandbox)
	})

	mountPoint := `%CONTAINER_SANDBOX_MOUNT_POINT%\workload\workload.exe`
	tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: []string{mountPoint, "sleep", "600"},
		SpecOpts: []oci.SpecOpts{inPod("container"), withUser(`NT AUTHORITY\SYSTEM`), limits}})
	if err != nil {
		t.Fatal(err)
	}
	location := filepath.Join(rootfs, id)
	pid := tk.Task.Pid()

	// The host's network, the image's files, SYSTEM's identity.
	if got, want := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", pid)), nsInode(t, env.HostNetnsPath()); got != want {
		t.Errorf("the process's network namespace %d, want the emulated host's %d (%s)", got, want, env.HostNetnsPath())
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != filepath.Join(location, "workload", "workload.exe") {
		t.Errorf("the process's program %q, %v; want the image's, below %s", exe, err, location)
	}
	r, err := execIn(ctx, t, env, tk, "env", mountPoint, "env", hostprocess.MountPointVariable)
	if err != nil {
		t.Fatal(err)
	}
	if want := hostprocess.MountPointVariable + "=" + winPath(location) + `\` + "\n"; r.stdout != want || r.code != 0 {
		t.Errorf("env = %q (exit %d, stderr %q), want %q", r.stdout, r.code, r.stderr, want)
	}
	r, err = execIn(ctx, t, env, tk, "whoami", mountPoint, "whoami")
	if err != nil {
		t.Fatal(err)
	}
	if want := "user=NT AUTHORITY\\SYSTEM\nuid=18 gid=0\n"; r.stdout != want {
		t.Errorf("whoami = %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
	out := filepath.Join(hostDir, "from-hpc.txt")
	r, err = execIn(ctx, t, env, tk, "write", mountPoint, "write", winPath(out), "written on the host")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "written on the host" || r.code != 0 {
		t.Errorf("the host file: %q, %v (exit %d, stderr %q)", b, err, r.code, r.stderr)
	}

	// The job's limits and stats.
	g := hostprocess.JobGroup(id)
	if got := g.ReadUint("memory", "memory.limit_in_bytes"); got != 256<<20 {
		t.Errorf("the job's memory limit %d, want %d", got, 256<<20)
	}
	if got := g.ReadUint("cpu", "cpu.cfs_quota_us"); got != 100000 {
		t.Errorf("the job's CPU quota %d, want one CPU (100000)", got)
	}
	o, stderr, err := env.Ctr(ctx, "task", "metrics", id)
	if err != nil {
		t.Fatalf("ctr task metrics: %v: %s", err, stderr)
	}
	m := metricsTable(o)
	for _, k := range []string{"cpu.total_runtime_ns", "memory.commit_bytes"} {
		if n, err := strconv.ParseUint(m[k], 10, 64); err != nil || n == 0 {
			t.Errorf("metrics %s = %q, want more than 0:\n%s", k, m[k], o)
		}
	}

	// A local group's temporary account, made for the container and gone with it.
	gk, err := env.StartTask(ctx, t, harness.TaskRun{ID: groupID, Args: []string{mountPoint, "sleep", "600"},
		SpecOpts: []oci.SpecOpts{inPod("container"), withUser("Users")}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = execIn(ctx, t, env, gk, "whoami", mountPoint, "whoami")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stdout, "\\"+groupID+"\nuid=") || !strings.HasSuffix(r.stdout, " gid=545\n") {
		t.Errorf("whoami as Users = %q (stderr %q), want the temporary account %s in gid 545", r.stdout, r.stderr, groupID)
	}
	account := "/run/runhcs/hostprocess/accounts/" + groupID
	if _, err := os.Stat(account); err != nil {
		t.Errorf("the temporary account while the container runs: %v", err)
	}

	pids := []int{int(pid), int(gk.Task.Pid())}
	deleteTask(ctx, t, tk)
	deleteTask(ctx, t, gk)
	leftNothing(t, rootfs, pids, []string{id, groupID}, account)

	// The shim killed: its job ends with it, as a job object with KILL_ON_JOB_CLOSE does, by
	// the job's keeper and before containerd's delete action runs (containerd is stopped
	// meanwhile so that the action cannot be what ended it); then the delete action removes
	// the bindings and the temporary account, and nothing is left.
	const crashPod, crashID = "hp-crash-pod", "hp-crash"
	crashSandbox, err := env.StartTask(ctx, t, harness.TaskRun{ID: crashPod, SpecOpts: []oci.SpecOpts{inPodOf(crashPod, "sandbox")}})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := env.StartTask(ctx, t, harness.TaskRun{ID: crashID, Args: []string{mountPoint, "sleep", "600"},
		SpecOpts: []oci.SpecOpts{inPodOf(crashPod, "container"), withUser("Users")}})
	if err != nil {
		t.Fatal(err)
	}
	crashAccount := "/run/runhcs/hostprocess/accounts/" + crashID
	if _, err := os.Stat(crashAccount); err != nil {
		t.Errorf("the temporary account while the container runs: %v", err)
	}
	shims := env.ShimPids(crashPod)
	if len(shims) != 1 {
		t.Fatalf("shims of %s: %v, want one", crashPod, shims)
	}
	exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
	containerd := env.DaemonPid(harness.DaemonContainerd)
	if containerd == 0 {
		t.Fatal("no containerd pid")
	}
	if err := syscall.Kill(containerd, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(containerd, syscall.SIGCONT)
		}
	}
	defer resume()
	if err := syscall.Kill(shims[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if left := waitJobEnded(crashID, int(ck.Task.Pid()), 15*time.Second); len(left) > 0 {
		t.Errorf("15s after the shim was killed, containerd stopped: %v", left)
	}
	if k := keepers(hostprocess.JobGroup(crashID).Path); len(k) > 0 {
		t.Errorf("the job's keeper %v still running after it ended the job", k)
	}
	resume()
	// containerd runs the shim's delete action before it reports the exit.
	exits.WaitExit(t, crashID, 30*time.Second)
	leftNothing(t, rootfs, []int{int(ck.Task.Pid())}, []string{crashID}, crashAccount)
	deleteTask(ctx, t, ck)
	deleteTask(ctx, t, crashSandbox)
}

// waitJobEnded waits up to d until container id's job has no group left and its process pid
// has ended (gone, or a zombie not yet reaped), and returns what is left if it has not.
func waitJobEnded(id string, pid int, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, ctl := range layout.CgroupControllers() {
			if g := hostprocess.JobGroup(id); g.Exists(ctl) {
				left = append(left, fmt.Sprintf("group %s (processes %v)", g.Dir(ctl), g.Pids()))
			}
		}
		if !processEnded(pid) {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processEnded reports whether process pid has ended. A process whose shim was killed is
// reaped by whoever inherits it (a subreaper, the test itself): until then it is a zombie,
// which runs nothing and holds nothing.
func processEnded(pid int) bool {
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(string(st[i+1:])), "Z") {
			return true
		}
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// keepers are the running keeper processes of the job group g (argv[0]
// hostprocess.KeeperName, then the group's path).
func keepers(g string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && args[0] == hostprocess.KeeperName && args[1] == g && !processEnded(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leftNothing checks that the HostProcess containers ids left no job group, binding, files'
// folder, temporary account (its record, account) or process (pids).
func leftNothing(t *testing.T, rootfs string, pids []int, ids []string, account string) {
	t.Helper()
	for _, c := range ids {
		for _, ctl := range layout.CgroupControllers() {
			if hostprocess.JobGroup(c).Exists(ctl) {
				t.Errorf("%s: its job's group %s after delete", c, hostprocess.JobGroup(c).Dir(ctl))
			}
		}
		if k := keepers(hostprocess.JobGroup(c).Path); len(k) > 0 {
			t.Errorf("%s: its job's keeper %v after delete", c, k)
		}
		loc := filepath.Join(rootfs, c)
		if isMountPoint(t, loc) {
			t.Errorf("%s: %s still mounted after delete", c, loc)
		}
		if _, err := os.Stat(loc); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: its files' folder %s after delete: %v", c, loc, err)
		}
	}
	if _, err := os.Stat(account); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary account after delete: %v, want gone", err)
	}
	for _, p := range pids {
		if !processEnded(p) {
			t.Errorf("process %d after delete: still running", p)
		}
	}
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// isMountPoint reports whether p is a mount point of this mount namespace (/proc/self/mountinfo).
func isMountPoint(t *testing.T, p string) bool {
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
