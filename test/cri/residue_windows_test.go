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

// podStateFolders are the folders containerd keeps for a pod with id: the shim's task bundle
// (runtime v2's state, whose plugin id both 1.7 and 2.x use) and the CRI's sandbox folders in
// its root and state.
func podStateFolders(t *testing.T, id string) []string {
	return []string{
		nodePath(t, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id),
		nodePath(t, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes", id),
		nodePath(t, "containerd", "state", "io.containerd.grpc.v1.cri", "sandboxes", id),
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
