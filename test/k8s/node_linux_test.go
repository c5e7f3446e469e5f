//go:build linux

package k8s

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcs"
	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// The emulated Windows node behind the Node (hack/cluster.sh: DIR/nodes/winnode-1): the tests
// that look at what the node holds (drain, recovery) reach it on the machine, as its operator
// would on a Windows host (hcsdiag, Get-HnsEndpoint, Get-Process, Restart-Service).

// nodeRoot is the folder of the cluster's (first) Windows node, firstNode (`cluster run` sets
// RUNHCS_CLUSTER_ROOT).
func nodeRoot(t testing.TB) string {
	t.Helper()
	return nodeRootOf(t, firstNode)
}

// nodeRootOf is the folder of the cluster's Windows node NAME: DIR/nodes/NAME.
func nodeRootOf(t testing.TB, name string) string {
	t.Helper()
	root := os.Getenv("RUNHCS_CLUSTER_ROOT")
	if root == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_CLUSTER_ROOT is not set: run the suite on the cluster (make test-cluster)")
		}
		t.Skip("no cluster: run through hack/cluster.sh run (make test-cluster)")
	}
	return filepath.Join(root, "nodes", name)
}

// winnode runs the node's own program (test/winnode) on it, e.g. `restart kubelet`.
func winnode(t testing.TB, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "bin", "winnode"), append([]string{args[0], "--root", root}, args[1:]...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("winnode %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nodeResidue lists what the node holds of pods: compute systems (hcsemu), HNS endpoints (but
// kube-proxy's remote ones) and namespaces, the container volumes mounted under the node's folder, the cgroups of compute
// systems and the shim processes (containerd-shim-runhcs-v1.exe under Wine). Empty: no pod is
// left on the node. A question that cannot be answered is itself an entry. kept are the
// containerd IDs of pods that stay (systemPodIDs: kube-proxy's HostProcess pod, which has no
// compute system, endpoint or cgroup): their shim and their files' mounts (below C:\hpc\ID)
// are not residue.
func nodeResidue(ctx context.Context, root string, kept []string) []string {
	var left []string
	sock := filepath.Join(root, "hcsemu.sock")
	emu := filepath.Join(root, "emu")
	if api, err := emuclient.DialHCS(sock); err != nil {
		left = append(left, fmt.Sprintf("compute systems: %v", err))
	} else {
		systems, err := hcs.NewClient(api).EnumerateComputeSystems(ctx, nil)
		api.Close()
		if err != nil {
			left = append(left, fmt.Sprintf("compute systems: %v", err))
		}
		for _, s := range systems {
			left = append(left, fmt.Sprintf("compute system %s (%s)", s.Id, s.State))
		}
	}
	if c, err := emuclient.DialHNS(sock); err != nil {
		left = append(left, fmt.Sprintf("HNS: %v", err))
	} else {
		api := hns.NewClient(c)
		// Remote endpoints are kube-proxy's, for Service backends off the node (the API
		// server behind the kubernetes Service, CoreDNS): they belong to Services, not pods.
		eps, err := api.ListEndpoints(ctx, hns.Filter{})
		if err != nil {
			left = append(left, fmt.Sprintf("HNS endpoints: %v", err))
		}
		for _, ep := range eps {
			if ep.Flags&hcn.EndpointFlagsRemoteEndpoint == 0 {
				left = append(left, "HNS endpoint "+ep.Id)
			}
		}
		nss, err := api.ListNamespaces(ctx, hns.Filter{})
		if err != nil {
			left = append(left, fmt.Sprintf("HNS namespaces: %v", err))
		}
		for _, ns := range nss {
			left = append(left, "HNS namespace "+ns.Id)
		}
		c.Close()
	}
	// hcsemu's own mounts under its root are the host's network namespace and the VMs' folder;
	// every other mount under the node's folder is a container's (or a VM's) volume.
	mounts := mountsUnder(root)
	// A kept container's files: the bind at C:\hpc\ID and the volume it binds, a mount of the
	// same file system (the volume's own device), whose path names no ID. (Only the bind of the
	// files themselves: its volume mounts below it are of the host's file system.)
	keptDevs := map[string]bool{}
	for _, m := range mounts {
		if slices.Contains(kept, filepath.Base(m.path)) {
			keptDevs[m.dev] = true
		}
	}
	for _, m := range mounts {
		if m.path != layout.HostNetns(emu) && m.path != layout.VMsDir(emu) && !keptDevs[m.dev] &&
			!slices.ContainsFunc(kept, func(id string) bool { return strings.Contains(m.path, id) }) {
			left = append(left, "mount "+m.path)
		}
	}
	for _, dir := range layout.CgroupDirs("/sys/fs/cgroup", emu) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				left = append(left, "cgroup "+filepath.Join(dir, e.Name()))
			}
		}
	}
	for pid, id := range shimProcesses(root) {
		if !slices.Contains(kept, id) {
			left = append(left, fmt.Sprintf("shim process %d (-id %s)", pid, id))
		}
	}
	for _, pid := range layout.VMInitProcesses("/proc", emu) {
		left = append(left, fmt.Sprintf("VM init process %d", pid))
	}
	return left
}

// waitNoResidue waits until the node holds nothing of pods but those of kube-system
// (nodeResidue is empty), or fails the test with what is left after waitLong: kubelet stops and
// removes a deleted pod's sandbox in the background.
func waitNoResidue(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(waitLong)
	for {
		left := nodeResidue(ctx, root, nil)
		if len(left) > 0 {
			left = nodeResidue(ctx, root, systemPodIDs(t, root))
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node still holds, %s after its pods were gone:\n  %s", waitLong, strings.Join(left, "\n  "))
		}
		time.Sleep(time.Second)
	}
}

// shimProcesses are the shim's processes of the node at root: Wine shows a Windows program's
// argv[0] as its path, and the node's mark (rootdir.NodeMarker: containerd.exe has it, and the
// shims it starts inherit it) tells them from the shims of the cluster's other nodes and of
// other nodes on the machine.
// Each is given with its -id (containerd's shim id: the pod's sandbox id).
func shimProcesses(root string) map[int]string {
	pids := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if strings.HasSuffix(strings.ReplaceAll(argv0, `\`, "/"), "/containerd-shim-runhcs-v1.exe") {
			if !rootdir.HasEnv(pid, rootdir.NodeMarker+"="+root) {
				continue
			}
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if !strings.Contains(string(st), ") Z ") {
				args := strings.Split(string(b), "\x00")
				if i := slices.Index(args, "-id"); i >= 0 && i+1 < len(args) {
					pids[pid] = args[i+1]
				} else {
					pids[pid] = ""
				}
			}
		}
	}
	return pids
}

// mount is a mount point and its file system's device (major:minor).
type mount struct{ path, dev string }

// mountsUnder lists the mount points at or under dir (this process's mount namespace, the
// machine's: `cluster run` changes only the network namespace).
func mountsUnder(dir string) []mount {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []mount{{path: "mountinfo: " + err.Error()}}
	}
	var out []mount
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := strings.ReplaceAll(f[4], `\040`, " ")
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, mount{path: p, dev: f[2]})
		}
	}
	return out
}
