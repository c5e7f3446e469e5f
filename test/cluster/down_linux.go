//go:build linux

package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// downCmd stops the cluster at --root and removes everything it made, also after a crash of any
// part: each node is taken down by its own `winnode down` (which sweeps the node's processes,
// the emulator's mounts and namespaces), serve is asked to stop the control plane, then any
// process left that belongs to the cluster is killed (never this one or its ancestors: the
// shell or script that called down may live in the folder), the namespace is removed (the
// nodes' links go with it), anything mounted under the folder is unmounted and the folder
// removed.
func downCmd(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	root := fs.String("root", "", "the cluster's folder")
	fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return fmt.Errorf("--root %q: the cluster's absolute folder is required", *root)
	}
	*root = filepath.Clean(*root)
	if _, err := os.Stat(*root); os.IsNotExist(err) {
		return nil // down is idempotent
	}
	start := time.Now()
	nodes, _ := filepath.Glob(filepath.Join(*root, "nodes", "*"))
	for _, n := range nodes {
		if err := nodeDown(n); err != nil {
			fmt.Fprintf(os.Stderr, "cluster down: node %s: %v\n", n, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(*root, "serve.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && rootdir.IsServe(pid, *root) {
			syscall.Kill(pid, syscall.SIGTERM)
			rootdir.WaitGone(pid, 90*time.Second)
			syscall.Kill(pid, syscall.SIGKILL) // if it hangs; what it left is swept below
		}
	}
	spare := ancestors()
	for _, pid := range processesOf(*root, spare) {
		fmt.Fprintf(os.Stderr, "cluster down: killing process %d left by the cluster\n", pid)
		syscall.Kill(pid, syscall.SIGKILL)
		rootdir.WaitGone(pid, 10*time.Second)
	}
	if err := hcsemu.RemoveNetnsFile(netnsFile(*root)); err != nil {
		fmt.Fprintf(os.Stderr, "cluster down: %v\n", err)
	}
	for _, m := range rootdir.MountsUnder(*root) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			fmt.Fprintf(os.Stderr, "cluster down: umount %s: %v\n", m, err)
		}
	}
	if err := os.RemoveAll(*root); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cluster: down in %.2fs\n", time.Since(start).Seconds())
	return nil
}

// nodeDown runs the node's own down (a copy of its winnode: down removes the folder with the
// binary in it).
func nodeDown(nodeRoot string) error {
	bin := filepath.Join(nodeRoot, "bin", "winnode")
	b, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("no winnode to take it down (%v); its processes are swept with the cluster's", err)
	}
	tmp, err := os.CreateTemp("", "winnode-down.")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	tmp.Close()
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return err
	}
	cmd := exec.Command(tmp.Name(), "down", "--root", nodeRoot)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// ancestors are this process and its parents, up to init: down never kills them.
func ancestors() map[int]bool {
	a := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !a[pid]; {
		a[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return a
}

// belongs says whether pid is a process of the cluster at root: it runs in the cluster's network
// namespace (netns is its inode, 0 if gone), its executable, root folder or working folder is
// under root, or an argument is a path inside root (the control plane's flags, a node's hcsemu
// --root).
func belongs(pid int, root string, netns uint64) bool {
	dir := fmt.Sprintf("/proc/%d/", pid)
	if netns != 0 {
		var st unix.Stat_t
		if unix.Stat(dir+"ns/net", &st) == nil && st.Ino == netns {
			return true
		}
	}
	under := func(p string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, l := range []string{"exe", "root", "cwd"} {
		if p, err := os.Readlink(dir + l); err == nil && under(strings.TrimSuffix(p, " (deleted)")) {
			return true
		}
	}
	cmdline, err := os.ReadFile(dir + "cmdline")
	if err != nil {
		return false
	}
	for _, a := range bytes.Split(cmdline, []byte{0}) {
		if strings.HasPrefix(string(a), root+"/") || strings.Contains(string(a), "="+root+"/") {
			return true
		}
	}
	return false
}

// processesOf lists the processes of the cluster at root, but none of spare.
func processesOf(root string, spare map[int]bool) []int {
	var netns uint64
	var st unix.Stat_t
	if unix.Stat(netnsFile(root), &st) == nil && st.Dev != 0 {
		// The bind mount's inode is the namespace's (nsfs), as /proc/PID/ns/net shows it.
		netns = st.Ino
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || spare[pid] {
			continue
		}
		if belongs(pid, root, netns) {
			pids = append(pids, pid)
		}
	}
	return pids
}
