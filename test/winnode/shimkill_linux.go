//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// Shim kills: `winnode run --shim-kills` runs a program inside the node and, while it runs,
// SIGKILLs the shim of a pod when the program asks. A Windows program under Wine cannot send a
// Linux signal (its TerminateProcess makes wineserver end the threads, which is not what a crash
// is), and the shims are Linux processes of the node, so the node's own program does it: the soak
// of the shim sandboxer (test/cri TestSandboxSoak, `hack/winnode.sh soak`) asks for it.
//
// The protocol is files under the node's folder, which the program reaches as Z:\…: the program
// writes shim-kills/NAME.req holding a pod id (whole, by rename); winnode answers with
// shim-kills/NAME.done holding "killed PID…" once every shim process of that pod is gone, or
// "error: …". A request is answered once.

// shimKillDir is the folder of the requests and answers.
func shimKillDir(root string) string { return filepath.Join(root, "shim-kills") }

// shimImage is the shim's program name as Wine shows it in a process's command line (the
// Windows path containerd started it with, e.g. Z:\…\bin\containerd-shim-runhcs-v1.exe).
const shimImage = "containerd-shim-runhcs-v1.exe"

// isShimOf says whether cmdline (a /proc/PID/cmdline, NUL-separated, as Wine leaves it: the
// Windows command line's arguments, padded with NULs) is a runhcs shim serving pod: its program
// is the shim and its -id argument is pod. containerd starts a pod's shim with the pod's id (the
// sandbox's id under the shim sandboxer, the pause container's with podsandbox), and the shim
// re-executes itself with the same arguments to serve.
func isShimOf(cmdline []byte, pod string) bool {
	args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	if len(args) < 3 || !strings.EqualFold(filepath.Base(strings.ReplaceAll(args[0], `\`, "/")), shimImage) {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-id" {
			return args[i+1] == pod
		}
	}
	return false
}

// shimsOf lists the node's shim processes serving pod.
func shimsOf(root, pod string) []int {
	var pids []int
	for _, pid := range processesOf(root, os.Getpid()) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && isShimOf(b, pod) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killShims SIGKILLs every shim process of pod and waits until they are gone.
func killShims(root, pod string) (string, error) {
	if pod == "" {
		return "", errors.New("the request names no pod")
	}
	pids := shimsOf(root, pod)
	if len(pids) == 0 {
		return "", fmt.Errorf("no shim process of pod %s among the node's processes", pod)
	}
	var killed []string
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return "", fmt.Errorf("SIGKILL shim %d of pod %s: %w", pid, pod, err)
		}
		rootdir.WaitGone(pid, time.Minute)
		if err := syscall.Kill(pid, 0); err == nil && !isZombie(pid) {
			return "", fmt.Errorf("shim %d of pod %s still there a minute after SIGKILL", pid, pod)
		}
		killed = append(killed, strconv.Itoa(pid))
	}
	return "killed " + strings.Join(killed, " "), nil
}

// isZombie says whether pid has exited and waits for its parent to reap it.
func isZombie(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && bytes.HasPrefix(b[i:], []byte(") Z "))
}

// serveShimKills answers the requests in the node's shim-kills folder until stop is closed.
func serveShimKills(root string, stop <-chan struct{}) error {
	dir := shimKillDir(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".req")
			if !ok {
				continue
			}
			done := filepath.Join(dir, name+".done")
			if _, err := os.Stat(done); err == nil {
				continue
			}
			req, err := os.ReadFile(filepath.Join(dir, e.Name()))
			answer, kerr := "", err
			if err == nil {
				answer, kerr = killShims(root, strings.TrimSpace(string(req)))
			}
			if kerr != nil {
				answer = "error: " + kerr.Error()
			}
			fmt.Fprintf(os.Stderr, "winnode: shim kill %s: %s\n", name, answer)
			if err := atomicfile.WriteFile(done, []byte(answer+"\n"), 0o644); err != nil {
				return err
			}
		}
		select {
		case <-stop:
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
