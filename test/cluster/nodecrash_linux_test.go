//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// TestDownAfterNodeCrash takes down a whole cluster that is up, after a crash of its nodes'
// parts (RUNHCS_CLUSTER_CRASH_ROOT: its folder; hack/cluster.sh test runs this last, on the
// cluster it tested): the last node's serve, hcsemu and containerd.exe and the first node's
// kubelet.exe are killed with SIGKILL, then `cluster down` runs. Nothing of any node is left: no
// process marked as a node's (rootdir.NodeMarker) or of the folder, no mount under it, no cgroup
// folder of a node's emulator, and no folder.
func TestDownAfterNodeCrash(t *testing.T) {
	root := os.Getenv("RUNHCS_CLUSTER_CRASH_ROOT")
	if root == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_CLUSTER_CRASH_ROOT is not set (hack/cluster.sh test sets it)")
		}
		t.Skip("RUNHCS_CLUSTER_CRASH_ROOT is not set: run through hack/cluster.sh test")
	}
	testenv.RequireRoot(t, "a cluster's processes")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "nodes", "winnode-*"))
	if len(nodes) == 0 {
		t.Fatalf("%s: no node folders (nodes/winnode-K)", root)
	}
	marked := func(node string) []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil && rootdir.HasEnv(pid, rootdir.NodeMarker+"="+node) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	var cgroups []string
	for _, n := range nodes {
		if len(marked(n)) == 0 {
			t.Fatalf("node %s: no process carries its mark; is the cluster up?", n)
		}
		for _, d := range layout.CgroupDirs("/sys/fs/cgroup", filepath.Join(n, "emu")) {
			if _, err := os.Stat(d); err == nil {
				cgroups = append(cgroups, d)
			}
		}
	}
	if len(cgroups) == 0 {
		t.Fatal("no node has cgroup folders of its emulator")
	}
	first, last := nodes[0], nodes[len(nodes)-1]
	kill := func(what string, pid int) {
		if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
			t.Fatalf("%s: no process to kill (pid %d)", what, pid)
		}
		t.Logf("killed %s (pid %d)", what, pid)
	}
	pidIn := func(file string) int {
		b, _ := os.ReadFile(file)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	withArg := func(node, arg string) int {
		for _, pid := range marked(node) {
			if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(c), arg) {
				return pid
			}
		}
		return 0
	}
	kill(last+": serve", pidIn(filepath.Join(last, "serve.pid")))
	kill(last+": hcsemu", withArg(last, "\x00--address\x00"+filepath.Join(last, "hcsemu.sock")))
	kill(last+": containerd.exe", withArg(last, "containerd.exe\x00--config"))
	kill(first+": kubelet.exe", pidIn(filepath.Join(first, "kubelet", "kubelet.pid")))

	down := exec.Command(self, "down", "--root", root)
	down.Env = append(os.Environ(), "RUNHCS_CLUSTER_AS_COMMAND=1")
	if out, err := down.CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	for _, n := range nodes {
		for _, pid := range marked(n) {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
				t.Errorf("node %s: process %d still runs", n, pid)
			}
		}
	}
	if left := processesOf(root, ancestors()); len(left) > 0 {
		t.Errorf("processes of the cluster left: %v", left)
	}
	if m := rootdir.MountsUnder(root); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup folder %s left (%v)", d, err)
		}
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", root, err)
	}
}
