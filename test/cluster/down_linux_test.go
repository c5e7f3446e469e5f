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

	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// TestDownAfterCrash brings the real control plane up (RUNHCS_CLUSTER_BIN: the folder
// hack/cluster.sh fills with the pinned binaries; hack/cluster.sh test runs this), kills serve
// and the API server with SIGKILL, and runs down from a shell whose working folder is inside the
// cluster's folder: down removes every process, the namespace, every mount and the folder, and
// leaves its caller alive.
func TestDownAfterCrash(t *testing.T) {
	bin := os.Getenv("RUNHCS_CLUSTER_BIN")
	if bin == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_CLUSTER_BIN is not set (hack/cluster.sh test sets it)")
		}
		t.Skip("RUNHCS_CLUSTER_BIN is not set: run through hack/cluster.sh test")
	}
	testenv.RequireRoot(t, "network namespaces")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "cluster")
	rbin := filepath.Join(root, "bin")
	if err := os.MkdirAll(rbin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "coredns"} {
		if err := os.Link(filepath.Join(bin, b), filepath.Join(rbin, b)); err != nil {
			t.Fatal(err)
		}
	}
	// This test binary is the cluster command too (main is not run by go test: TestMain below
	// dispatches when asked to).
	up := exec.Command(self, "up", "--root", root, "--bin", rbin)
	up.Env = append(os.Environ(), "RUNHCS_CLUSTER_AS_COMMAND=1")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		down := exec.Command(self, "down", "--root", root)
		down.Env = append(os.Environ(), "RUNHCS_CLUSTER_AS_COMMAND=1")
		down.Run()
	})
	pids := processesOf(root, ancestors())
	if len(pids) < 6 { // serve, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, coredns
		t.Fatalf("processes of the cluster: %v, want at least 6", pids)
	}
	b, _ := os.ReadFile(filepath.Join(root, "serve.pid"))
	serve, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	syscall.Kill(serve, syscall.SIGKILL)
	for _, pid := range pids {
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(c), "kube-apiserver") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// The caller: a shell inside the folder, running down and then printing that it lives.
	sh := exec.Command("sh", "-c", `"$0" down --root "$1" && echo alive`, self, root)
	sh.Dir = filepath.Join(root, "logs")
	sh.Env = append(os.Environ(), "RUNHCS_CLUSTER_AS_COMMAND=1")
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alive") {
		t.Fatalf("down from a shell in the folder: %v\n%s", err, out)
	}
	if left := processesOf(root, ancestors()); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(st), ") Z ") {
				t.Errorf("process %d of the cluster still runs", p)
			}
		}
	}
	if m := rootdir.MountsUnder(root); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", root, err)
	}
}

// TestMain lets this test binary act as the cluster command (up, serve, down) for
// TestDownAfterCrash, which needs a binary it can start detached.
func TestMain(m *testing.M) {
	if os.Getenv("RUNHCS_CLUSTER_AS_COMMAND") == "1" && len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
