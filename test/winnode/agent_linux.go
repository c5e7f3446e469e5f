//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// agent is one of a Windows node's services that winnode starts beside containerd.exe:
// kubelet.exe, kube-proxy.exe. Each runs as one of the node's processes: in the node's Wine
// prefix (so the node's `down`, which ends every process of the prefix, ends it too), in the
// emulated host's network namespace, its own session, its output in DIR/logs/NAME.log, its pid
// in DIR/NAME/NAME.pid and the winnode flags it was started with in DIR/NAME/NAME.args.json, so
// that `winnode restart NAME` starts it again as it was.
type agent struct {
	name    string                 // kubelet, kube-proxy: its folder, log and restart name
	exe     string                 // the program's name, for messages
	healthy func(root string) bool // true once it serves
}

func (a agent) dir(root string) string      { return filepath.Join(root, a.name) }
func (a agent) pidFile(root string) string  { return filepath.Join(a.dir(root), a.name+".pid") }
func (a agent) argsFile(root string) string { return filepath.Join(a.dir(root), a.name+".args.json") }
func (a agent) logPath(root string) string  { return filepath.Join(root, "logs", a.name+".log") }

// running is the pid of the agent started in the node at root, if that process still runs.
func (a agent) running(root string) (int, bool) {
	b, err := os.ReadFile(a.pidFile(root))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil || !belongs(pid, root) {
		return 0, false
	}
	return pid, true
}

// run starts exe with argv (its own flags) in the node at root and returns once the agent is
// healthy, it exited, or timeout passed (it then keeps running, for `down` to end). args are
// the winnode flags it was started with, recorded for restart.
func (a agent) run(root string, env map[string]string, args []string, exe string, argv []string, timeout time.Duration) error {
	if pid, ok := a.running(root); ok {
		return fmt.Errorf("%s already runs in the node at %s (pid %d)", a.name, root, pid)
	}
	for _, d := range []string{a.dir(root), filepath.Join(root, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteJSON(a.argsFile(root), args, 0o644); err != nil {
		return err
	}
	hcsemuBin, err := os.ReadFile(filepath.Join(root, "hcsemu.path"))
	if err != nil {
		return fmt.Errorf("the node's hcsemu: %w", err)
	}
	cmd := exec.Command(string(hcsemuBin), append([]string{"hostns", "--root", emuRoot(root), "--", env["WINE64"], exe}, argv...)...)
	// The node's mark (nodeMarker), as restart gives containerd.exe: the agent is a process of
	// the node, and down must find it also when serve crashed and the prefix's wineserver did
	// not end it (observed: a cluster's node whose serve and hcsemu were SIGKILLed kept its
	// kubelet.exe until the cluster's down swept it).
	cmd.Env = append(os.Environ(), nodeMarker+"="+filepath.Clean(root))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.OpenFile(a.logPath(root), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "winnode %s: %s\n", a.name, strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logf, logf
	// Started in C:\ (the prefix's drive_c, which Wine shows as C:\), as Windows starts a service
	// in a folder of C:: kubelet's Windows defaults are rooted paths without a drive
	// (podLogsDir /var/log/pods, the plugin folders), which Windows resolves on the current
	// drive. From a Linux folder Wine's current drive would be Z:, the Linux root.
	cmd.Dir = filepath.Join(env["WINEPREFIX"], "drive_c")
	// Its own session: it outlives this command, as the node's other parts outlive `up`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(a.pidFile(root), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	deadline := time.After(timeout)
	for {
		if a.healthy(root) {
			fmt.Fprintf(os.Stderr, "winnode: %s healthy in %.2fs (log %s)\n", a.name, time.Since(start).Seconds(), a.logPath(root))
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited (%v) before its healthz answered; its log: %s", a.exe, err, a.logPath(root))
		case <-deadline:
			return fmt.Errorf("%s's healthz did not answer within %s; its log: %s (it keeps running: winnode down --root %s)", a.name, timeout, a.logPath(root), root)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop kills the agent (SIGKILL, as TerminateProcess ends it) and gives the winnode flags it was
// started with, for its command to start it again.
func (a agent) stop(root string, timeout time.Duration) ([]string, error) {
	var args []string
	ok, err := atomicfile.ReadJSON(a.argsFile(root), &args)
	if err != nil {
		return nil, err
	}
	if !ok {
		// A kube-proxy of the node's DaemonSet pod is kubelet's: deleting the pod restarts it.
		return nil, fmt.Errorf("no %s was started by winnode in the node at %s (%s is missing): start it with `winnode %s`; one that runs as a pod (a HostProcess DaemonSet) restarts when its pod is deleted", a.name, root, a.argsFile(root), a.name)
	}
	b, err := os.ReadFile(a.pidFile(root))
	if err != nil {
		return nil, fmt.Errorf("%s's pid: %w", a.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s's pid file %s: %q: %w", a.name, a.pidFile(root), b, err)
	}
	return args, killAndWait(pid, a.exe, timeout)
}
