//go:build !windows

package shim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/defaults"
	cshim "github.com/containerd/containerd/v2/pkg/shim"
)

// defaultLauncher puts shim sockets where containerd's runc shim does and starts real shims.
func defaultLauncher() launcher {
	return launcher{socketRoot: filepath.Join(defaults.DefaultStateDir, "s"), start: startShimProcess}
}

// startShimProcess starts the new shim and lets it go: the start action exits right away, and
// the shim is re-parented and lives on.
func startShimProcess(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// launchOrJoin returns the address of the shim of group (a pod), starting it if it is not
// running. The socket address is derived from the pod as containerd's runc shim derives it (a
// hash of containerd's address, the namespace and the group under <state dir>/s), so a second
// task of the pod finds the socket of the first: if it accepts connections, the task joins
// that shim. The new shim gets the listening socket as fd 3 (the shim package's serve takes it
// from there).
func (ln launcher) launchOrJoin(ctx context.Context, f startFlags, bundle, group string) (string, error) {
	address, err := cshim.CreateSocketAddress(ctx, ln.socketRoot, f.address, group, false)
	if err != nil {
		return "", err
	}
	l, err := cshim.NewSocket(address)
	if err != nil {
		if !cshim.SocketEaddrinuse(err) {
			return "", fmt.Errorf("create shim socket %s: %w", address, err)
		}
		alive, err := ln.serving(address)
		if err != nil {
			return "", err
		}
		if alive {
			// The pod's shim is serving: join it.
			return address, nil
		}
		// A stale socket of a shim that died.
		if err := cshim.RemoveSocket(address); err != nil {
			return "", fmt.Errorf("remove stale shim socket %s: %w", address, err)
		}
		if l, err = cshim.NewSocket(address); err != nil {
			return "", fmt.Errorf("create shim socket %s: %w", address, err)
		}
	}
	// Closing our listener must not remove the socket the shim will serve on.
	l.SetUnlinkOnClose(false)
	defer l.Close()
	sf, err := l.File()
	if err != nil {
		_ = cshim.RemoveSocket(address)
		return "", err
	}
	defer sf.Close()
	self, err := os.Executable()
	if err != nil {
		_ = cshim.RemoveSocket(address)
		return "", err
	}
	args := []string{"-namespace", f.namespace, "-id", f.id, "-address", f.address}
	if f.debug {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = bundle
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	cmd.ExtraFiles = []*os.File{sf}
	// Its own process group: a signal to containerd's group must not reach the shim.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ln.start(cmd); err != nil {
		_ = cshim.RemoveSocket(address)
		return "", fmt.Errorf("start shim: %w", err)
	}
	return address, nil
}

func removeShimSocket(address string) error { return cshim.RemoveSocket(address) }

// defaultJoinWait bounds how long the start action waits for a pod's socket to either accept
// a connection or refuse one (serving).
const defaultJoinWait = 30 * time.Second

// serving reports whether a shim serves the unix socket address: true once a connection is
// accepted, false only when nothing listens there (ECONNREFUSED, or no socket file: the
// socket of a shim that died). Any other failure — a dial that timed out on a loaded machine,
// a listener whose backlog is full (EAGAIN) — is retried until joinWait has passed, and then
// is an error. containerd's CanConnect, which its runc shim's start uses, gives up after
// 100 ms and reads any failure as a dead shim; the start action then removed the live pod
// shim's socket and started a second shim for the pod, one without its sandbox (found by
// the soak suite's Hyper-V churn: "no Hyper-V pod sandbox of that id in this shim").
func (ln launcher) serving(address string) (bool, error) {
	wait := ln.joinWait
	if wait == 0 {
		wait = defaultJoinWait
	}
	path := strings.TrimPrefix(address, "unix://")
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return true, nil
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("shim socket %s neither accepted nor refused a connection within %v (a pod shim too busy to join): %w", address, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialContainerd connects to containerd's gRPC endpoint, a unix socket (-address, a path or a
// unix:// URL).
func dialContainerd(ctx context.Context, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", strings.TrimPrefix(address, "unix://"))
}
