//go:build !windows

package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
)

// countingLauncher is a launcher under dir whose start records the shims it is asked to start
// and starts none.
func countingLauncher(dir string) (*launcher, *[]*exec.Cmd) {
	var started []*exec.Cmd
	return &launcher{socketRoot: filepath.Join(dir, "s"), start: func(cmd *exec.Cmd) error {
		started = append(started, cmd)
		return nil
	}}, &started
}

// TestJoinPodShim: a task whose spec names a pod's sandbox gets the address of the shim
// already serving that pod, and no new shim is started (the launcher is never called).
func TestJoinPodShim(t *testing.T) {
	dir := t.TempDir()
	ln, started := countingLauncher(dir)
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	f := startFlags{namespace: "k8s.io", id: "app", address: "/run/containerd/containerd.sock"}

	// The pod's shim, serving on the socket of group "sandbox1".
	podAddr, err := cshim.CreateSocketAddress(ctx, ln.socketRoot, f.address, "sandbox1", false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cshim.NewSocket(podAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	bundle := filepath.Join(dir, "app")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"annotations": map[string]string{"io.kubernetes.cri.sandbox-id": "sandbox1"}})
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
	got, err := ln.startOrJoin(ctx, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(*started) != 0 {
		t.Errorf("%d shims started; joining a pod starts none", len(*started))
	}
	if got != podAddr {
		t.Errorf("address %s, want the pod shim's %s", got, podAddr)
	}
	if b, _ := os.ReadFile(filepath.Join(bundle, "address")); string(b) != podAddr {
		t.Errorf("address file %q", b)
	}
	if !strings.HasPrefix(got, "unix://") {
		t.Errorf("address %s is not a unix socket URI", got)
	}
}

// TestLaunchPodShim: the first task of a pod, whose socket nobody serves, starts exactly one
// shim, on that socket, for its own id and namespace; the seam TestJoinPodShim counts with.
func TestLaunchPodShim(t *testing.T) {
	dir := t.TempDir()
	ln, started := countingLauncher(dir)
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	f := startFlags{namespace: "k8s.io", id: "sandbox1", address: "/run/containerd/containerd.sock"}
	bundle := filepath.Join(dir, "sandbox1")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
	got, err := ln.startOrJoin(ctx, f, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cshim.RemoveSocket(got) })
	want, _ := cshim.CreateSocketAddress(ctx, ln.socketRoot, f.address, "sandbox1", false)
	if got != want {
		t.Errorf("address %s, want %s", got, want)
	}
	if len(*started) != 1 {
		t.Fatalf("%d shims started, want 1", len(*started))
	}
	cmd := (*started)[0]
	if args := strings.Join(cmd.Args[1:], " "); args != "-namespace k8s.io -id sandbox1 -address /run/containerd/containerd.sock" {
		t.Errorf("shim started with %q", args)
	}
	if cmd.Dir != bundle || len(cmd.ExtraFiles) != 1 {
		t.Errorf("shim started in %q with %d extra files; want the bundle and the listening socket", cmd.Dir, len(cmd.ExtraFiles))
	}
}

func TestShimGroup(t *testing.T) {
	dir := t.TempDir()
	if g := shimGroup(dir, "c1"); g != "c1" {
		t.Errorf("no spec: group %q", g)
	}
	_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"annotations":{"io.kubernetes.cri.sandbox-id":"pod"}}`), 0o644)
	if g := shimGroup(dir, "c1"); g != "pod" {
		t.Errorf("group %q, want pod", g)
	}
}

// TestShimSocketPermissions: whatever the umask, a pod's shim socket is 0600, in a socket
// folder that is its owner's only, and the address file in the bundle is 0600.
func TestShimSocketPermissions(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			// A short folder: the socket's path (64 hex digits in it) must fit in sun_path.
			dir, err := os.MkdirTemp("", "s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			ln, _ := countingLauncher(dir)
			ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
			f := startFlags{namespace: "k8s.io", id: "sandbox1", address: "/run/containerd/containerd.sock"}
			bundle := filepath.Join(dir, "sandbox1")
			if err := os.MkdirAll(bundle, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Chdir(bundle)
			// The umask is the process's: set it around the start only.
			old := syscall.Umask(umask)
			address, err := ln.startOrJoin(ctx, f, "")
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cshim.RemoveSocket(address) })
			sock := strings.TrimPrefix(address, "unix://")
			for _, tc := range []struct {
				what, path string
				want       os.FileMode // exactly, or with want 0 no group or other bits
			}{
				{"the shim socket", sock, 0o600},
				{"the socket folder", filepath.Dir(sock), 0},
				{"the address file", filepath.Join(bundle, "address"), 0o600},
			} {
				fi, err := os.Stat(tc.path)
				if err != nil {
					t.Errorf("%s: %v", tc.what, err)
					continue
				}
				if perm := fi.Mode().Perm(); (tc.want != 0 && perm != tc.want) || perm&0o077 != 0 {
					t.Errorf("%s %s has mode %04o under umask %03o: want it its owner's only", tc.what, tc.path, perm, umask)
				}
			}
		})
	}
}

// podAppBundle makes the bundle of task "app" of pod "sandbox1" under dir and enters it.
func podAppBundle(t *testing.T, dir string) {
	t.Helper()
	bundle := filepath.Join(dir, "app")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"annotations": map[string]string{"io.kubernetes.cri.sandbox-id": "sandbox1"}})
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
}

// TestBusyPodShimIsNotReplaced: a pod's shim whose socket does not accept a connection at
// once (here its backlog is full, so a connect fails with EAGAIN, as containerd's 100 ms
// CanConnect fails on a loaded machine) is alive. The start action must neither remove its
// socket nor start a second shim for the pod (which would not have the pod's sandbox); it
// fails with an error naming the socket instead.
func TestBusyPodShimIsNotReplaced(t *testing.T) {
	dir := shortTempDir(t)
	ln, started := countingLauncher(dir)
	ln.joinWait = 300 * time.Millisecond
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	f := startFlags{namespace: "k8s.io", id: "app", address: "/run/containerd/containerd.sock"}
	podAddr, err := cshim.CreateSocketAddress(ctx, ln.socketRoot, f.address, "sandbox1", false)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(podAddr, "unix://")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	// A listener with the smallest backlog that never accepts, filled until a connect fails.
	lfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(lfd)
	if err := syscall.Bind(lfd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 0); err != nil {
		t.Fatal(err)
	}
	full := false
	for i := 0; i < 16 && !full; i++ {
		cfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(cfd)
		err = syscall.Connect(cfd, &syscall.SockaddrUnix{Name: path})
		full = errors.Is(err, syscall.EAGAIN)
		if err != nil && !full {
			t.Fatalf("connect %d: %v", i, err)
		}
	}
	if !full {
		t.Fatal("the listener's backlog did not fill")
	}
	if cshim.CanConnect(podAddr) {
		t.Fatal("containerd's CanConnect reaches the busy socket: the test does not make the case it is about")
	}

	podAppBundle(t, dir)
	_, err = ln.startOrJoin(ctx, f, "")
	if err == nil || !strings.Contains(err.Error(), podAddr) {
		t.Errorf("start with the pod's shim busy: %v, want an error naming %s", err, podAddr)
	}
	if len(*started) != 0 {
		t.Errorf("%d shims started for a pod whose shim is alive", len(*started))
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the live pod shim's socket: %v", err)
	}
}

// TestStalePodShimSocketIsReplaced: the socket file of a pod's shim that died (nothing listens:
// a connect is refused) is removed and a new shim started on it.
func TestStalePodShimSocketIsReplaced(t *testing.T) {
	dir := shortTempDir(t)
	ln, started := countingLauncher(dir)
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	f := startFlags{namespace: "k8s.io", id: "app", address: "/run/containerd/containerd.sock"}
	podAddr, err := cshim.CreateSocketAddress(ctx, ln.socketRoot, f.address, "sandbox1", false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cshim.NewSocket(podAddr)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the shim died; its socket file stays
	t.Cleanup(func() { _ = cshim.RemoveSocket(podAddr) })

	podAppBundle(t, dir)
	got, err := ln.startOrJoin(ctx, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if got != podAddr || len(*started) != 1 {
		t.Errorf("address %s with %d shims started; want %s and one new shim", got, len(*started), podAddr)
	}
}

// shortTempDir is a temporary folder with a short path: a unix socket's path under it must fit
// in sun_path's 108 bytes, which a test name in t.TempDir's path can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "shim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}
