package compute

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/testenv"
)

// TestSweepDeadInstances: the cgroups of a daemon that died (no process holds its root's lock
// file) are removed with the processes in them; those of a live daemon (its lock file held
// open, here by the test) and the sweeping daemon's own are left alone.
func TestSweepDeadInstances(t *testing.T) {
	testenv.RequireRoot(t, "cgroups")
	const cgroupRoot = "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(cgroupRoot, "freezer")); err != nil {
		t.Skipf("no cgroup v1 freezer at %s: %v", cgroupRoot, err)
	}
	ctx := context.Background()

	liveRoot, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.Create(filepath.Join(liveRoot, lockFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	live := layout.Instance(liveRoot)
	dead := layout.Instance(filepath.Join(t.TempDir(), "gone")) // a root no process holds
	own := layout.Instance(filepath.Join(t.TempDir(), "own"))

	groups := map[string]*cgroup{}
	for _, inst := range []string{live, dead, own} {
		m := &cgroupManager{mountRoot: cgroupRoot, base: filepath.Join("hcsemu", inst)}
		for _, c := range cgroupControllers {
			if err := os.MkdirAll(filepath.Join(cgroupRoot, c, m.base), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		g, err := m.create("sys1")
		if err != nil {
			t.Fatal(err)
		}
		groups[inst] = g
		t.Cleanup(func() {
			g.destroy(ctx)
			_ = m.removeBase()
		})
	}
	// A process left in the dead daemon's system group, as a SIGKILLed daemon leaves them.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()
	defer func() { _ = sleeper.Process.Kill() }()
	if err := groups[dead].addProcess(sleeper.Process.Pid, cgroupControllers...); err != nil {
		t.Fatal(err)
	}

	sweepDeadInstances(ctx, cgroupRoot, "/proc", own)

	for _, c := range cgroupControllers {
		if _, err := os.Stat(filepath.Join(cgroupRoot, c, "hcsemu", dead)); !os.IsNotExist(err) {
			t.Errorf("the dead daemon's %s folder is still there (%v)", c, err)
		}
		for _, inst := range []string{live, own} {
			if _, err := os.Stat(groups[inst].dir(c)); err != nil {
				t.Errorf("instance %s lost its %s group: %v", inst, c, err)
			}
		}
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Error("the process in the dead daemon's group was not killed")
	}
}

func TestInstanceOf(t *testing.T) {
	// The name the cgroup folders have always had: FNV-64a of the root, 16 hex digits.
	if got := layout.Instance("/var/lib/hcsemu"); len(got) != 16 || got == layout.Instance("/var/lib/hcsemu2") {
		t.Errorf("instanceOf = %q", got)
	}
}
