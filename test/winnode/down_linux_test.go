//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// TestDownAfterCrash brings a node up, runs a container in it (ctr.exe inside the node), kills
// one part (containerd.exe, or hcsemu with the container's mounts and namespaces), and checks
// that `winnode down` leaves nothing: no process of the node, no mount, no folder.
// hack/winnode.sh test runs it with RUNHCS_WINNODE_BIN (the node's binaries),
// RUNHCS_WINNODE_PREFIX (the prepared Wine prefix) and RUNHCS_WINNODE_CONTAINERD (the
// --containerd line of the binaries: 2, the default, or 1.7).
func TestDownAfterCrash(t *testing.T) {
	bin, prefix, containerd := nodeBinaries(t)
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
						if len(rootdir.MountsUnder(root)) > 1 { // the host netns and the container's volume
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
			rootdir.WaitGone(victim, time.Minute)
			run("down", "--root", root)
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("the node's folder is still there: %v", err)
			}
			if m := rootdir.MountsUnder(root); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			if pids := processesOf(root, os.Getpid()); len(pids) != 0 {
				t.Errorf("processes left: %v", pids)
			}
			if pids := nodeLike(root); len(pids) != 0 {
				t.Errorf("processes naming the node left: %v", pids)
			}
		})
	}
}

// nodeBinaries are the node's binaries, its prepared Wine prefix and the --containerd line of
// its containerd.exe, from the variables hack/winnode.sh test sets (see TestDownAfterCrash).
func nodeBinaries(t *testing.T) (bin, prefix, containerd string) {
	t.Helper()
	testenv.RequireRoot(t, "hcsemu mounts and makes network namespaces")
	bin, prefix = os.Getenv("RUNHCS_WINNODE_BIN"), os.Getenv("RUNHCS_WINNODE_PREFIX")
	if bin == "" || prefix == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINNODE_BIN and RUNHCS_WINNODE_PREFIX are not set: run through make test-winnode")
		}
		t.Skip("no node binaries: run through make test-winnode")
	}
	containerd = os.Getenv("RUNHCS_WINNODE_CONTAINERD")
	if containerd == "" {
		containerd = "2"
	}
	return bin, prefix, containerd
}

// TestDownFromCaller runs hack/winnode.sh down as docs/winnode.md tells users to work with a node:
// from a shell that loaded DIR/node.env, and under timeout in such a shell (issue 21, item 5:
// down used to take every process holding the node's WINEPREFIX for the node's, and killed its
// own caller). down must return 0, leave the caller's shell and the caller's other processes
// running, and still leave nothing of the node. Before down, every process that holds the
// node's Wine prefix or names its folder must be one down finds (the marker reaches them all).
func TestDownFromCaller(t *testing.T) {
	bin, prefix, containerd := nodeBinaries(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "winnode.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, down string }{
		{"sourced node.env", `"$WINNODE" down --root "$NODE"`},
		{"timeout", `timeout 300 "$WINNODE" down --root "$NODE"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, err := os.MkdirTemp("", "winnode-caller-")
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(root) // up makes it
			self := filepath.Join(bin, "winnode")
			t.Cleanup(func() { exec.Command(self, "down", "--root", root).Run() })
			if out, err := exec.Command(self, "up", "--root", root, "--bin", bin, "--wine-prefix", prefix, "--containerd", containerd).CombinedOutput(); err != nil {
				t.Fatalf("winnode up: %v\n%s", err, out)
			}
			// The script's down runs DIR/bin/winnode (a copy of it).
			if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("cp", self, filepath.Join(root, "bin", "winnode")).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			node := processesOf(root, os.Getpid())
			if len(node) == 0 {
				t.Fatal("no process of the node found after up")
			}
			for _, pid := range nodeLike(root) {
				if !belongs(pid, root) {
					cmdline, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
					t.Errorf("process %d (%q) holds the node's Wine prefix or names its folder, but down would not find it", pid, cmdline)
				}
			}
			// The caller: a shell that loaded node.env, with a process of its own beside down
			// (its output elsewhere, or the shell's output would stay open while it runs).
			keep := filepath.Join(t.TempDir(), "caller-child.pid")
			sh := exec.Command("bash", "-c", `set -u
. "$NODE/node.env"
sleep 600 >/dev/null 2>&1 &
echo $! >"$KEEP"
`+c.down+`
echo "down rc=$?"
`)
			sh.Env = append(os.Environ(), "NODE="+root, "KEEP="+keep, "WINNODE="+script)
			out, err := sh.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "down rc=0\n") {
				t.Fatalf("the caller's shell: %v (want it to print down rc=0)\n%s", err, out)
			}
			b, err := os.ReadFile(keep)
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(child, 0); err != nil {
				t.Errorf("down killed the caller's own process %d: %v", child, err)
			} else {
				syscall.Kill(child, syscall.SIGKILL)
				rootdir.WaitGone(child, time.Minute)
			}
			for _, pid := range node {
				if syscall.Kill(pid, 0) == nil && !zombie(pid) {
					t.Errorf("process %d of the node is still running", pid)
				}
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("the node's folder is still there: %v", err)
			}
			if m := rootdir.MountsUnder(root); len(m) != 0 {
				t.Errorf("mounts left: %v", m)
			}
			if pids := nodeLike(root); len(pids) != 0 {
				t.Errorf("processes naming the node left: %v", pids)
			}
		})
	}
}

// nodeLike lists, but for this test, the processes that look like the node's by the broad
// signs down used to go by: its Wine prefix in their environment, or its folder as their
// executable's, root or working folder, or in an argument. Without a caller that loaded
// node.env, they are the node's, and must all be gone after down.
func nodeLike(root string) []int {
	entries, _ := os.ReadDir("/proc")
	under := func(p string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	prefix := "WINEPREFIX=" + filepath.Join(root, "wine", "prefix")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || zombie(pid) {
			continue
		}
		dir := "/proc/" + e.Name() + "/"
		match := false
		for _, l := range []string{"exe", "root", "cwd"} {
			if p, err := os.Readlink(dir + l); err == nil && under(strings.TrimSuffix(p, " (deleted)")) {
				match = true
			}
		}
		if b, err := os.ReadFile(dir + "cmdline"); err == nil {
			for _, a := range strings.Split(string(b), "\x00") {
				match = match || strings.HasPrefix(a, root+"/")
			}
		}
		if b, err := os.ReadFile(dir + "environ"); err == nil {
			for _, kv := range strings.Split(string(b), "\x00") {
				match = match || kv == prefix
			}
		}
		if match {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie says whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	b, _ := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func itoa(i int) string { return strconv.Itoa(i) }
