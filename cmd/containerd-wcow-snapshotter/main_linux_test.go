package main

import (
	"context"
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
