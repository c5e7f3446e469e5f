//go:build linux

package main

import (
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

	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// downCmd stops the node at --root and removes everything it made, also when a part of it (or
// serve itself) crashed: serve is asked to stop; then any process left that belongs to the node
// is killed, a hcsemu restarted on the emulator's root removes what a dead one left (its mounts,
// network namespaces and cgroups, as hcsemu does at every start), anything still mounted under
// the root is unmounted and the folder removed.
func downCmd(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	root := fs.String("root", "", "the node's folder")
	fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", *root)
	}
	*root = filepath.Clean(*root)
	if _, err := os.Stat(*root); os.IsNotExist(err) {
		return nil // nothing to do: down is idempotent
	}
	start := time.Now()
	if b, err := os.ReadFile(filepath.Join(*root, "serve.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && rootdir.IsServe(pid, *root) {
			syscall.Kill(pid, syscall.SIGTERM)
			rootdir.WaitGone(pid, 90*time.Second)
			syscall.Kill(pid, syscall.SIGKILL) // if it hangs; what it left is swept below
		}
	}
	for _, pid := range processesOf(*root, os.Getpid()) {
		fmt.Fprintf(os.Stderr, "winnode down: killing process %d left by the node\n", pid)
		syscall.Kill(pid, syscall.SIGKILL)
		rootdir.WaitGone(pid, 10*time.Second)
	}
	if err := cleanEmulator(*root); err != nil {
		fmt.Fprintf(os.Stderr, "winnode down: %v\n", err)
	}
	for _, m := range rootdir.MountsUnder(*root) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			fmt.Fprintf(os.Stderr, "winnode down: umount %s: %v\n", m, err)
		}
	}
	if err := os.RemoveAll(*root); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "winnode: down in %.2fs\n", time.Since(start).Seconds())
	return nil
}

// cleanEmulator starts hcsemu on the node's emulator root when a previous one left state there
// (it removes a dead daemon's namespaces and mounts at start) and stops it again.
func cleanEmulator(root string) error {
	if _, err := os.Stat(emuRoot(root)); err != nil {
		return nil
	}
	if len(rootdir.MountsUnder(emuRoot(root))) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(root, "hcsemu.path"))
	if err != nil {
		return fmt.Errorf("the node's hcsemu: %w", err)
	}
	bin := string(b)
	sock := filepath.Join(root, "cleanup.sock")
	cmd := exec.Command(bin, "--address", sock, "--root", emuRoot(root))
	out, err := os.Create(filepath.Join(root, "logs", "hcsemu-cleanup.log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = out, out
		defer out.Close()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("hcsemu to clean up: %w", err)
	}
	if err := waitFor("hcsemu (clean-up)", cmd, time.Minute, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	cmd.Process.Signal(syscall.SIGTERM)
	return cmd.Wait()
}

// nodeMarker is the environment variable that marks the node's processes: serve sets it to the
// node's folder on itself before it starts anything, so every process of the node inherits it:
// hcsemu, the wineserver (which forks itself into the background), containerd.exe and what it
// starts, and Wine's services (Wine passes a program's Unix environment on to the processes it
// creates, as Windows' CreateProcess passes the parent's environment block). It is not in
// node.env, so a shell that loaded node.env, a script or `timeout` around down, or a program
// started with `winnode run`, does not carry it, while each of those holds the node's WINEPREFIX.
// A marker, rather than the process tree or a cgroup: the tree breaks when the wineserver and
// Wine's services detach themselves and when serve has crashed, and hcsemu moves every
// container's processes into cgroups of its own.
const nodeMarker = rootdir.NodeMarker

// belongs says whether pid is a process of the node at root: it carries the node's marker
// (nodeMarker), or its root folder is inside root (a container's process, which hcsemu starts
// chrooted in the container's volume under the node's folder, with the container's environment
// rather than the node's). Nothing else counts: a caller's shell whose working folder or
// arguments name the node's folder, or whose environment is node.env's, is not the node's.
func belongs(pid int, root string) bool {
	dir := fmt.Sprintf("/proc/%d/", pid)
	if p, err := os.Readlink(dir + "root"); err == nil {
		p = strings.TrimSuffix(p, " (deleted)")
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return rootdir.HasEnv(pid, nodeMarker+"="+root)
}

// processesOf lists the processes of the node at root, but not self.
func processesOf(root string, self int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if belongs(pid, root) {
			pids = append(pids, pid)
		}
	}
	return pids
}
