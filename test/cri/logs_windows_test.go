//go:build windows

package cri

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReopenContainerLog rotates a running container's CRI log as kubelet does: the file is
// renamed, ReopenContainerLog makes containerd open a new one at the path, and the workload's
// later lines go there while the renamed file keeps the earlier ones.
func TestReopenContainerLog(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-logs")
	cfg := containerConfig("ticker", "tick", "0.2")
	id := startContainer(t, n, pod, podCfg, cfg)
	path := filepath.Join(podCfg.LogDirectory, cfg.LogPath)
	waitLog(t, path, " stdout F tick 2\n")
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatalf("rename the CRI log: %v", err)
	}
	if err := n.rt.ReopenContainerLog(ctx(t), id); err != nil {
		t.Fatalf("ReopenContainerLog: %v", err)
	}
	// A new file at the path, with lines written after the reopen (ticks go on), none from
	// before the rename.
	waitLog(t, path, " stdout F tick ")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), " stdout F tick 1\n") {
		t.Errorf("new CRI log %q has the first tick, written before the rename", b)
	}
	old, err := os.ReadFile(rotated)
	if err != nil || !strings.Contains(string(old), " stdout F tick 1\n") {
		t.Errorf("renamed CRI log: %q, %v; want the earlier ticks", old, err)
	}
}
