//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
)

// TestDownAfterCrash brings a node up, runs a container in it (ctr.exe inside the node), kills
// one part (containerd.exe, or hcsemu with the container's mounts and namespaces), and checks
// that `winnode down` leaves nothing: no process of the node, no mount, no folder.
// hack/winnode.sh test runs it with RUNHCS_WINNODE_BIN (the node's binaries),
// RUNHCS_WINNODE_PREFIX (the prepared Wine prefix) and RUNHCS_WINNODE_CONTAINERD (the
// --containerd line of the binaries: 2, the default, or 1.7).
func TestDownAfterCrash(t *testing.T) {
	testenv.RequireRoot(t, "hcsemu mounts and makes network namespaces")
	bin, prefix := os.Getenv("RUNHCS_WINNODE_BIN"), os.Getenv("RUNHCS_WINNODE_PREFIX")
	if bin == "" || prefix == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINNODE_BIN and RUNHCS_WINNODE_PREFIX are not set: run through make test-winnode")
		}
		t.Skip("no node binaries: run through make test-winnode")
	}
	containerd := os.Getenv("RUNHCS_WINNODE_CONTAINERD")
	if containerd == "" {
		containerd = "2"
	}
	self := filepath.Join(bin, "winnode")
	for _, part := range []string{"containerd.exe", "hcsemu"} {
		t.Run(part, func(t *testing.T) {
			root, err := os.MkdirTemp("", "winnode-crash-")
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(root) // up makes it
			t.Cleanup(func() { exec.Command(self, "down", "--root", root).Run() })
			run := func(args ...string) string {
				t.Helper()
				out, err := exec.Command(self, args...).CombinedOutput()
				if err != nil {
					t.Fatalf("winnode %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			run("up", "--root", root, "--bin", bin, "--wine-prefix", prefix, "--containerd", containerd)
			ctr := func(args ...string) string {
				return run(append([]string{"run", "--root", root, "--", filepath.Join(bin, "ctr.exe"), "--address", Pipe}, args...)...)
			}
			ctr("image", "pull", "--hosts-dir", win(filepath.Join(root, "certs.d")), "docker.io/"+TestImage)
			ctr("run", "-d", "--snapshotter", "wcow", "--runtime", "io.containerd.runhcs.v1", "docker.io/"+TestImage, "crash", `C:\workload\workload.exe`, "sleep", "600")
			// The container's process runs chrooted in its volume under the node's folder.
			var victim int
			deadline := time.Now().Add(2 * time.Minute)
			for victim == 0 {
				for _, pid := range processesOf(root, os.Getpid()) {
					cmdline, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
					c := string(cmdline)
					switch {
					case part == "hcsemu" && strings.HasPrefix(c, filepath.Join(bin, "hcsemu")+"\x00--address"):
						if len(mountsUnder(root)) > 1 { // the host netns and the container's volume
							victim = pid
						}
					case part == "containerd.exe" && strings.Contains(c, `containerd.exe`) && strings.Contains(c, "--config"):
						victim = pid
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s process with a running container after 2 minutes", part)
				}
				time.Sleep(100 * time.Millisecond)
			}
			p, err := os.FindProcess(victim)
			if err != nil {
				t.Fatal(err)
			}
			p.Kill()
			waitGone(victim, time.Minute)
			run("down", "--root", root)
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("the node's folder is still there: %v", err)
			}
			if m := mountsUnder(root); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			if pids := processesOf(root, os.Getpid()); len(pids) != 0 {
				t.Errorf("processes left: %v", pids)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
