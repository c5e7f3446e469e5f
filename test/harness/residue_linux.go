package harness

// What an environment holds beyond its idle state, for the soak suite (test/soak) and any test
// that wants to say "nothing is left": an extension of the cleanup checks of cleanup_linux.go
// (Leftovers says what is left after Close; Residue says what is left while the environment
// runs), and the resource counts of its long-lived daemons.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// cgroupRoot is where the cgroup v1 controllers are mounted (hcsemu's default).
const cgroupRoot = "/sys/fs/cgroup"

// HCSEmuRoot is the root (--root) of this environment's hcsemu.
func (e *Env) HCSEmuRoot() string { return filepath.Join(e.Root, "hcsemu") }

// HCSEmuCgroups are the folders /sys/fs/cgroup/<controller>/hcsemu/<instance> of this
// environment's hcsemu, one per controller, as the emulator names them (package
// internal/hcsemu/layout): a compute system's group is a folder in each.
func (e *Env) HCSEmuCgroups() []string { return layout.CgroupDirs(cgroupRoot, e.HCSEmuRoot()) }

// HCSEmuCgroup is the folder of this environment's hcsemu in one cgroup controller.
func (e *Env) HCSEmuCgroup(controller string) string {
	return layout.CgroupDir(cgroupRoot, controller, e.HCSEmuRoot())
}

// Residue lists what the environment holds beyond its idle state (daemons running, the test
// image imported): compute systems in hcsemu, mounts under the root other than hcsemu's host
// network namespace, cgroups of compute systems, Linux network namespaces and HNS endpoints
// of hcsemu (a VM's netns/vm-* among them), shim processes, init processes of emulated
// utility VMs, and bundles (state folders) of containerd's runtime v2. Empty
// means nothing is left. A question that cannot be answered is itself an entry.
func (e *Env) Residue(ctx context.Context) []string {
	var left []string
	if systems, err := e.ComputeSystems(ctx); err != nil {
		left = append(left, fmt.Sprintf("compute systems: cannot enumerate: %v", err))
	} else {
		for _, s := range systems {
			left = append(left, fmt.Sprintf("compute system %s (%s)", s.Id, s.State))
		}
	}
	for _, m := range e.TaskMountsUnderRoot() {
		left = append(left, "mount "+m)
	}
	for _, dir := range e.HCSEmuCgroups() {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			left = append(left, fmt.Sprintf("cgroup %s: %v", dir, err))
		}
		for _, ent := range entries {
			if ent.IsDir() {
				left = append(left, "cgroup "+filepath.Join(dir, ent.Name()))
			}
		}
	}
	// hcsemu's network namespaces: the host's is the emulated host's, for the daemon's life;
	// every other one is a compartment (an HNS namespace) of some container, or a VM's.
	netns := layout.NetnsDir(e.HCSEmuRoot())
	if entries, err := os.ReadDir(netns); err == nil {
		for _, ent := range entries {
			if ent.Name() != layout.HostNetnsName {
				left = append(left, "network namespace "+filepath.Join(netns, ent.Name()))
			}
		}
	}
	if eps, err := e.hnsEndpoints(); err != nil {
		left = append(left, fmt.Sprintf("HNS endpoints: cannot enumerate: %v", err))
	} else {
		for _, ep := range eps {
			left = append(left, "HNS endpoint "+ep)
		}
	}
	for _, pid := range e.shimProcesses() {
		left = append(left, fmt.Sprintf("shim process %d", pid))
	}
	for _, pid := range e.VMInitProcesses() {
		left = append(left, fmt.Sprintf("VM init process %d", pid))
	}
	// The runtime v2 bundles, by namespace: containerd makes one per task and removes it when
	// the task is deleted (the shim's state file lives in it).
	tasks := filepath.Join(e.Root, "containerd", "state", "io.containerd.runtime.v2.task")
	if nss, err := os.ReadDir(tasks); err == nil {
		for _, ns := range nss {
			bundles, _ := os.ReadDir(filepath.Join(tasks, ns.Name()))
			for _, b := range bundles {
				left = append(left, "bundle "+filepath.Join(tasks, ns.Name(), b.Name()))
			}
		}
	}
	return left
}

// WaitNoResidue waits until Residue is empty or d has passed, and returns the last Residue
// (empty: nothing left). containerd cleans up after a dead shim in the background, so a check
// right after an error must give it time.
func (e *Env) WaitNoResidue(ctx context.Context, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := e.Residue(ctx)
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hnsEndpoints lists the ids of the HNS endpoints hcsemu holds.
func (e *Env) hnsEndpoints() ([]string, error) {
	c, err := emuclient.DialHNS(e.HCSEmuAddress)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out, err := c.EnumerateEndpoints("")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(out) == "" || strings.TrimSpace(out) == "null" {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		return nil, fmt.Errorf("endpoint list %q: %w", out, err)
	}
	return ids, nil
}

// shimProcesses are the runhcs shim processes of this environment: any process of the shim
// binary whose command line names the environment's root (its containerd address does).
func (e *Env) shimProcesses() []int {
	var pids []int
	for _, pid := range processesUnder(e.Root) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) == filepath.Base(e.Bin.Shim) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// VMInitProcesses are the init processes of this environment's emulated utility VMs, found as
// the emulator names them (package internal/hcsemu/layout): their command line and working
// folder do not name the root, so shimProcesses' way of finding them does not apply.
func (e *Env) VMInitProcesses() []int { return layout.VMInitProcesses("/proc", e.HCSEmuRoot()) }

// DaemonPid is the pid of the named daemon (DaemonHCSEmu, DaemonSnapshotter, DaemonContainerd),
// 0 if the environment has none of that name.
func (e *Env) DaemonPid(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.daemons {
		if d.name == name {
			return d.cmd.Process.Pid
		}
	}
	return 0
}

// DaemonStat is a resource count of one long-lived daemon.
type DaemonStat struct {
	Pid int
	// FDs is the number of open file descriptors (/proc/PID/fd).
	FDs int
	// Threads is the number of OS threads (/proc/PID/status).
	Threads int
	// Goroutines is the number of goroutines, or -1 where the daemon has no debug endpoint to
	// ask (hcsemu and the snapshotter have none; containerd's is its debug socket's pprof).
	Goroutines int
}

func (s DaemonStat) String() string {
	g := "n/a"
	if s.Goroutines >= 0 {
		g = strconv.Itoa(s.Goroutines)
	}
	return fmt.Sprintf("pid %d: %d fds, %d threads, goroutines %s", s.Pid, s.FDs, s.Threads, g)
}

// DaemonStats counts the resources of the running daemons (hcsemu, the snapshotter,
// containerd), by name.
func (e *Env) DaemonStats(ctx context.Context) (map[string]DaemonStat, error) {
	e.mu.Lock()
	ds := append([]*daemon(nil), e.daemons...)
	e.mu.Unlock()
	out := map[string]DaemonStat{}
	for _, d := range ds {
		pid := d.cmd.Process.Pid
		fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		st := DaemonStat{Pid: pid, FDs: len(fds), Goroutines: -1}
		if status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status")); err == nil {
			if m := threadsRE.FindSubmatch(status); m != nil {
				st.Threads, _ = strconv.Atoi(string(m[1]))
			}
		}
		if d.name == DaemonContainerd {
			n, err := e.containerdGoroutines(ctx)
			if err != nil {
				return nil, err
			}
			st.Goroutines = n
		}
		out[d.name] = st
	}
	return out, nil
}

var (
	threadsRE    = regexp.MustCompile(`(?m)^Threads:\s+(\d+)`)
	goroutinesRE = regexp.MustCompile(`goroutine profile: total (\d+)`)
)

// containerdGoroutines asks containerd's debug socket (its [debug] address, which serves
// net/http/pprof) for the goroutine count.
func (e *Env) containerdGoroutines(ctx context.Context) (int, error) {
	sock := filepath.Join(e.Root, "containerd-debug.sock")
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://containerd/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("containerd debug socket %s: %w", sock, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, err
	}
	m := goroutinesRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("containerd debug socket %s: no goroutine count in %q", sock, b[:min(len(b), 200)])
	}
	return strconv.Atoi(string(m[1]))
}
