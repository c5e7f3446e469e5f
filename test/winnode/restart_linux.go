//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// restartCmd stops one of the node's Windows services and starts it again as it was started,
// while everything else of the node (its pods among them) keeps running: what an administrator
// does with `Restart-Service kubelet` or `Restart-Service containerd`, and what a crash and the
// service manager's restart do. The process is killed (SIGKILL, as TerminateProcess ends it):
// what survives must survive a crash too.
//
//   - kubelet: kubelet.exe, started again by `winnode kubelet` with the flags it was first
//     started with (DIR/kubelet/kubelet.args.json); returns once its healthz answers.
//   - kube-proxy: kube-proxy.exe, likewise (DIR/kube-proxy/kube-proxy.args.json).
//   - containerd: containerd.exe, started again with the node's configuration, its log appended
//     to logs/containerd.log; returns once it answers `ctr version`. The shims, the snapshotter
//     and the pods keep running: containerd reconnects to its shims from their bootstrap files.
func restartCmd(args []string) error {
	fs := flag.NewFlagSet("restart", flag.ExitOnError)
	root := fs.String("root", "", "the node's folder")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the service to stop and to answer again")
	fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", *root)
	}
	*root = filepath.Clean(*root)
	if fs.NArg() != 1 {
		return fmt.Errorf("restart: want one service, kubelet, kube-proxy or containerd; got %q", fs.Args())
	}
	env, err := readEnv(*root)
	if err != nil {
		return err
	}
	switch svc := fs.Arg(0); svc {
	case "kubelet":
		args, err := kubeletAgent.stop(*root, *timeout)
		if err != nil {
			return err
		}
		return kubeletCmd(args)
	case "kube-proxy":
		args, err := kubeProxyAgent.stop(*root, *timeout)
		if err != nil {
			return err
		}
		return kubeProxyCmd(args)
	case "containerd":
		return restartContainerd(*root, env, *timeout)
	default:
		return fmt.Errorf("restart: service %q: want kubelet, kube-proxy or containerd", svc)
	}
}

// containerdPIDs are the node's containerd.exe processes: Wine shows a Windows program's Unix
// argv[0] as the program's path, and the node starts it with --config.
func containerdPIDs(root string) []int {
	var pids []int
	for _, pid := range processesOf(root, os.Getpid()) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if len(argv) > 1 && strings.HasSuffix(strings.ReplaceAll(string(argv[0]), `\`, "/"), "/containerd.exe") && string(argv[1]) == "--config" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func restartContainerd(root string, env map[string]string, timeout time.Duration) error {
	pids := containerdPIDs(root)
	if len(pids) != 1 {
		return fmt.Errorf("the node at %s runs %d containerd.exe processes (%v), want 1", root, len(pids), pids)
	}
	if err := killAndWait(pids[0], "containerd.exe", timeout); err != nil {
		return err
	}
	hcsemuBin, err := os.ReadFile(filepath.Join(root, "hcsemu.path"))
	if err != nil {
		return fmt.Errorf("the node's hcsemu: %w", err)
	}
	bin := filepath.Dir(string(hcsemuBin))
	cmd := exec.Command(string(hcsemuBin), "hostns", "--root", emuRoot(root), "--", env["WINE64"],
		filepath.Join(bin, "containerd.exe"), "--config", win(filepath.Join(root, "containerd.toml")), "--log-level", "debug")
	// The node's marker, as serve gives it to everything it starts, so that down ends it.
	cmd.Env = append(os.Environ(), nodeMarker+"="+root, "DISPLAY=")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = filepath.Join(env["WINEPREFIX"], "drive_c")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	logf, err := os.OpenFile(filepath.Join(root, "logs", "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "winnode restart: %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped while this command waits; it outlives us otherwise
	ctr := exec.Command(string(hcsemuBin), "hostns", "--root", emuRoot(root), "--", env["WINE64"],
		filepath.Join(bin, "ctr.exe"), "--address", env["RUNHCS_NODE_PIPE"], "--timeout", "10s", "version")
	ctr.Env, ctr.Dir = cmd.Env, cmd.Dir
	deadline := time.Now().Add(timeout)
	for {
		c := exec.Command(ctr.Path, ctr.Args[1:]...)
		c.Env, c.Dir = ctr.Env, ctr.Dir
		out, err := c.CombinedOutput()
		if err == nil {
			if _, verr := serverVersion(string(out)); verr == nil {
				fmt.Fprintf(os.Stderr, "winnode: containerd.exe answers again in %.2fs\n", time.Since(start).Seconds())
				return nil
			}
		}
		if cmd.ProcessState != nil {
			return fmt.Errorf("containerd.exe exited (%v) before it answered; its log: %s", cmd.ProcessState, filepath.Join(root, "logs", "containerd.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd.exe does not answer `ctr version` %s after its restart: %v: %s", timeout, err, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// killAndWait kills pid and waits until it is gone (or a zombie of a parent that has not
// reaped it yet: serve reaps its children only when it stops).
func killAndWait(pid int, what string, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
		return nil // already gone (it crashed): a service manager starts it again too
	} else if err != nil {
		return fmt.Errorf("stop %s (pid %d): %w", what, pid, err)
	}
	rootdir.WaitGone(pid, timeout)
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(st, []byte(") Z ")) {
		return fmt.Errorf("%s (pid %d) still runs %s after SIGKILL", what, pid, timeout)
	}
	return nil
}
