//go:build windows

package cri

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// shimExe is the shim's image name, as the node's Windows processes list it.
const shimExe = "containerd-shim-runhcs-v1.exe"

// processes lists the image names of the node's Windows processes (under Wine, those of the
// node's wineserver: containerd, the shims, CNI plugins).
func processes(t *testing.T) []string {
	t.Helper()
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		t.Fatalf("CreateToolhelp32Snapshot: %v", err)
	}
	defer windows.CloseHandle(snap)
	var names []string
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		names = append(names, windows.UTF16ToString(e.ExeFile[:]))
	}
	return names
}

// countShims counts the node's shim processes.
func countShims(t *testing.T) int {
	n := 0
	for _, p := range processes(t) {
		if strings.EqualFold(p, shimExe) {
			n++
		}
	}
	return n
}

// waitNoShim waits for the node's last shim to end: a shim ends on its own once containerd
// has deleted its last task and shut it down.
func waitNoShim(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for countShims(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("shim processes a minute after the last pod's removal: %v", processes(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodePath is a path under the node's root (RUNHCS_NODE_ROOT, a Linux path), as this Windows
// program reaches it under Wine (drive Z: is /).
func nodePath(t *testing.T, elem ...string) string {
	t.Helper()
	root := os.Getenv("RUNHCS_NODE_ROOT")
	if root == "" {
		t.Fatal("RUNHCS_NODE_ROOT is not set: run the suite through hack/winnode.sh")
	}
	return `Z:` + filepath.FromSlash(path.Join(append([]string{root}, elem...)...))
}

// podStateFolders are the folders containerd keeps for a pod with id of the default handler
// (runhcs-wcow-process). With the pause container (sandboxer podsandbox): the pause task's bundle
// in runtime v2's state (whose plugin id both 1.7 and 2.x use) and the CRI's sandbox folders in
// its root and state. With the shim sandboxer (2.x, --sandboxer shim) there is no pause task and
// no CRI sandbox folder (in containerd v2.4.2 only the podsandbox controller makes those,
// internal/cri/server/podsandbox/sandbox_run.go): plugins/sandbox/controller.go (plugin
// io.containerd.sandbox.controller.v1, id "shim") makes the sandbox's bundle with
// v2.NewBundle(ctx, c.root, c.state, sandboxID, …), i.e. <state>/<ns>/<id> and a work folder
// <root>/<ns>/<id> (core/runtime/v2/bundle.go), the plugin's state and root being containerd's
// joined with the plugin's URI (cmd/containerd/server/server.go); Shutdown deletes both.
func podStateFolders(t *testing.T, id string) []string {
	t.Helper()
	if shimSandboxer(t) {
		const controller = "io.containerd.sandbox.controller.v1.shim"
		return []string{
			nodePath(t, "containerd", "state", controller, "k8s.io", id),
			nodePath(t, "containerd", "root", controller, "k8s.io", id),
		}
	}
	return []string{
		nodePath(t, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id),
		nodePath(t, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes", id),
		nodePath(t, "containerd", "state", "io.containerd.grpc.v1.cri", "sandboxes", id),
	}
}

// shimSandboxer tells whether the node runs the default handler's pods through the shim's
// sandbox API (containerd 2.x's sandboxer "shim", docs/sandbox-api.md) rather than a pause
// container (sandboxer "podsandbox"), from the node's RUNHCS_NODE_SANDBOXER. Like containerd17,
// it is for the few checks where containerd itself answers differently; branch on it with a
// comment citing containerd's source.
func shimSandboxer(t testing.TB) bool {
	t.Helper()
	switch v := os.Getenv("RUNHCS_NODE_SANDBOXER"); v {
	case "shim":
		return true
	case "podsandbox":
		return false
	default:
		t.Fatalf("RUNHCS_NODE_SANDBOXER=%q: want podsandbox or shim (run the suite through hack/winnode.sh)", v)
		return false
	}
}

// nodeMounts counts the mounts under the node's root (hcsemu's container volumes and their
// C:\proc, mapped folders and files), from the mount table Wine shows as Z:\proc.
func nodeMounts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(`Z:\proc\self\mountinfo`)
	if err != nil {
		t.Fatalf("read the mount table: %v", err)
	}
	root := os.Getenv("RUNHCS_NODE_ROOT")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
			n++
		}
	}
	return n
}
