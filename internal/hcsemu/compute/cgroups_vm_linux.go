package compute

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Nested groups: a hosted container's group lives inside its VM's, so the VM's memory and CPU
// limits bound it (cgroup v1 hierarchies; memory.use_hierarchy is always on in current kernels).

func (m *cgroupManager) createNested(parent *cgroup, id string) (*cgroup, error) {
	g := &cgroup{m: m, name: parent.name + "/" + groupName(id)}
	for _, c := range cgroupControllers {
		if err := os.Mkdir(g.dir(c), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			g.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", g.dir(c), err)
		}
	}
	return g, nil
}

// destroyChildren destroys the groups nested in g (a VM's hosted containers), which must go
// before g itself can be removed.
func (g *cgroup) destroyChildren(ctx context.Context) {
	seen := map[string]bool{}
	for _, c := range cgroupControllers {
		entries, _ := os.ReadDir(g.dir(c))
		for _, e := range entries {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				(&cgroup{m: g.m, name: g.name + "/" + e.Name()}).destroy(ctx)
			}
		}
	}
}
