package layout

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCgroupDirsResolveTheRoot(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	real, _ = filepath.EvalSymlinks(real)
	got := CgroupDirs("/cg", link)
	if len(got) != len(CgroupControllers()) {
		t.Fatalf("%d folders, want one per controller (%v)", len(got), CgroupControllers())
	}
	for i, c := range CgroupControllers() {
		if want := filepath.Join("/cg", c, "hcsemu", Instance(real)); got[i] != want {
			t.Errorf("folder %d = %s, want %s", i, got[i], want)
		}
	}
	if a, b := Instance("/var/lib/hcsemu"), Instance("/var/lib/hcsemu2"); len(a) != 16 || a == b {
		t.Errorf("Instance: %q and %q", a, b)
	}
}

// TestVMInitProcesses runs on a made-up /proc: only the live VM inits of this root count.
func TestVMInitProcesses(t *testing.T) {
	proc := t.TempDir()
	root := "/var/lib/hcsemu-a"
	add := func(pid, cmdline, state, env string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{
			"cmdline": cmdline,
			"stat":    pid + " (exe) " + state + " 1 1",
			"environ": env,
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := func(vmRoot string) string {
		return strings.Join([]string{VMInitEnv + "=pod", VMInitRootEnv + "=" + vmRoot, "PATH=/bin"}, "\x00") + "\x00"
	}
	add("10", VMInitArg0+"\x00", "S", env(VMsDir(root)+"/abc/root"))                // ours
	add("11", VMInitArg0+"\x00", "Z", env(VMsDir(root)+"/def/root"))                // ours, a zombie
	add("12", VMInitArg0+"\x00", "S", env(VMsDir("/var/lib/hcsemu-ab")+"/x/root"))  // another root's
	add("13", "hcsemu\x00--root\x00"+root+"\x00", "S", env(VMsDir(root)+"/y/root")) // not a VM init
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := VMInitProcesses(proc, root); !slices.Equal(got, []int{10}) {
		t.Errorf("VMInitProcesses = %v, want [10]", got)
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{NetnsDir("/r"), "/r/netns"},
		{HostNetns("/r"), "/r/netns/host"},
		{VMNetns("/r", "1234"), "/r/netns/vm-1234"},
		{VMsDir("/r"), "/r/vms"},
		{CgroupBase("00ff"), "hcsemu/00ff"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
}
