package compute

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// TestLayoutAgreesWithTheEngine: the end-to-end harness finds what a daemon holds (its systems'
// cgroups, its network namespaces, its VM inits) where package layout says, and tells a test
// that nothing is left when it finds nothing there. So a running engine's objects must be
// exactly there: this fails if the engine names them otherwise. The root is reached through a
// symbolic link, as a test's temporary root may be.
func TestLayoutAgreesWithTheEngine(t *testing.T) {
	requireRoot(t)
	real := filepath.Join(t.TempDir(), "real")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, root); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(context.Background(), Config{Root: root, OSVersion: "10.0.20348.1", ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			e.Close(context.Background())
		}
	})
	const id = "layout@vm"
	startVM(t, e, id, "10.0.17763.1", 128)

	// The cgroups: a folder per controller for the daemon, and in each the VM's group.
	dirs := layout.CgroupDirs("/sys/fs/cgroup", root)
	if len(dirs) == 0 {
		t.Fatal("layout names no cgroup folders")
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("cgroup folder %s of the daemon: %v", dir, err)
			continue
		}
		var groups []string
		for _, ent := range entries {
			if ent.IsDir() {
				groups = append(groups, ent.Name())
			}
		}
		if len(groups) != 1 {
			t.Errorf("groups in %s with one VM running: %v, want the VM's only", dir, groups)
		}
	}

	// The network namespaces: the host's, and the VM's by its RuntimeId.
	if _, err := os.Stat(layout.HostNetns(root)); err != nil {
		t.Errorf("the emulated host's network namespace: %v", err)
	}
	props, err := e.Properties(context.Background(), wire.SystemRef{ID: id}, `{"PropertyTypes":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	var p schema2.Properties
	if err := json.Unmarshal([]byte(props), &p); err != nil || p.RuntimeId == "" {
		t.Fatalf("properties of %s: %s, %v", id, props, err)
	}
	if _, err := os.Stat(layout.VMNetns(root, p.RuntimeId)); err != nil {
		t.Errorf("the VM's network namespace: %v", err)
	}
	netns, err := os.ReadDir(layout.NetnsDir(root))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range netns {
		names = append(names, ent.Name())
	}
	slices.Sort(names)
	if want := []string{layout.HostNetnsName, filepath.Base(layout.VMNetns(root, p.RuntimeId))}; !slices.Equal(names, want) {
		t.Errorf("network namespaces %v, want %v", names, want)
	}

	// The VM's folder and its init process.
	if st, err := os.Stat(layout.VMsDir(root)); err != nil || !st.IsDir() {
		t.Errorf("the VMs' folder %s: %v", layout.VMsDir(root), err)
	}
	if pids := layout.VMInitProcesses("/proc", root); len(pids) != 1 {
		t.Errorf("VM init processes of the daemon: %v, want one", pids)
	}

	// Closed, the daemon leaves nothing there.
	closed = true
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup folder %s after Close: %v, want it gone", dir, err)
		}
	}
	if pids := layout.VMInitProcesses("/proc", root); len(pids) != 0 {
		t.Errorf("VM init processes after Close: %v", pids)
	}
}
