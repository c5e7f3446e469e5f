package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/core/snapshots"
	snproxy "github.com/containerd/containerd/v2/core/snapshots/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestServeAndStop serves on a socket, answers a Prepare, and stops cleanly on SIGTERM.
func TestServeAndStop(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "wcow.sock")
	done := make(chan error, 1)
	go func() { done <- run(sock, filepath.Join(dir, "root"), filepath.Join(dir, "no-containerd.sock")) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sn := snproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), "wcow")
	ctx := namespaces.WithNamespace(context.Background(), "default")
	var mounts int
	for deadline := time.Now().Add(10 * time.Second); ; {
		m, err := sn.Prepare(ctx, "k", "")
		if err == nil {
			mounts = len(m)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on %s: %v", sock, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if mounts != 1 {
		t.Fatalf("Prepare gave %d mounts", mounts)
	}
	if err := sn.Walk(ctx, func(context.Context, snapshots.Info) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no shutdown 15s after SIGTERM")
	}
	// A second instance on the same socket starts: the stale socket file is replaced.
	done2 := make(chan error, 1)
	go func() { done2 <- run(sock, filepath.Join(dir, "root"), "") }()
	time.Sleep(300 * time.Millisecond)
	if _, err := sn.Stat(ctx, "k"); err != nil {
		t.Fatalf("snapshot lost across restart: %v", err)
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}

// TestPermissions: whatever the umask, the socket is 0600 and what the snapshotter makes for
// it (the socket's folder, the root) is its owner's only; a root made before with looser
// permissions is made owner-only too.
func TestPermissions(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			dir := t.TempDir()
			sock, root := filepath.Join(dir, "run", "wcow.sock"), filepath.Join(dir, "root")
			if umask == 0 {
				if err := os.Mkdir(root, 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chmod(root, 0o755)
			}
			// The umask is the process's: set it around the start only (the socket and the
			// folders are made before run serves).
			old := syscall.Umask(umask)
			done := make(chan error, 1)
			go func() { done <- run(sock, root, filepath.Join(dir, "no-containerd.sock")) }()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if c, err := net.Dial("unix", sock); err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					syscall.Umask(old)
					t.Fatalf("no socket at %s within 10s", sock)
				}
			}
			syscall.Umask(old)
			for _, tc := range []struct {
				what, path string
				want       os.FileMode // exactly, or with want 0 no group or other bits
			}{
				{"the socket", sock, 0o600},
				{"the socket's folder", filepath.Dir(sock), 0},
				{"the root", root, 0},
				{"the snapshots folder", filepath.Join(root, "snapshots"), 0},
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
			syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("no shutdown 15s after SIGTERM")
			}
		})
	}
}
