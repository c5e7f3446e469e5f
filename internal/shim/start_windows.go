package shim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	winio "github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// defaultLauncher starts real shims; start waits for the new shim's pipe, so the process stays
// this one's child until then.
func defaultLauncher() launcher { return launcher{start: (*exec.Cmd).Start} }

// pipeAddress is the shim's named pipe (docs/architecture.md, "Wire compatibility"; the name
// hcsshim uses).
func pipeAddress(namespace, group string) string {
	return fmt.Sprintf(`\\.\pipe\ProtectedPrefix\Administrators\containerd-shim-%s-%s-pipe`, namespace, group)
}

// launchOrJoin returns the pipe of the shim of group (a pod), starting the shim if the pipe
// does not answer. The new shim serves on the pipe named by -socket (the shim package's serve on
// Windows listens there); start waits until it answers before returning its address.
func (l launcher) launchOrJoin(ctx context.Context, f startFlags, bundle, group string) (string, error) {
	address := pipeAddress(f.namespace, group)
	short := 100 * time.Millisecond
	if c, err := winio.DialPipe(address, &short); err == nil {
		_ = c.Close()
		return address, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	args := []string{"-namespace", f.namespace, "-id", f.id, "-address", f.address, "-socket", address}
	if f.debug {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = bundle
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
	if err := l.start(cmd); err != nil {
		return "", fmt.Errorf("start shim: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := winio.DialPipe(address, &short); err == nil {
			_ = c.Close()
			break
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("shim exited before serving %s: %v", address, err)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("waiting for the shim to serve %s: %w", address, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("shim did not serve %s within 30s", address)
		}
	}
	return address, nil
}

// removeShimSocket: a named pipe disappears with its last handle.
func removeShimSocket(string) error { return nil }

// dialContainerd connects to containerd's gRPC endpoint, a named pipe (-address
// \\.\pipe\containerd-containerd by default).
func dialContainerd(ctx context.Context, address string) (net.Conn, error) {
	return winio.DialPipeContext(ctx, address)
}
