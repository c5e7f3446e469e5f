//go:build !windows

package stdio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"time"
)

// openBinary starts a logging binary with the protocol of containerd's runc shim
// (cmd/containerd-shim-runc-v2/process/io.go): the URI's path is the program, its query
// becomes arguments (key then value), CONTAINER_ID and CONTAINER_NAMESPACE are set, fd 3 is
// the read end of stdout, fd 4 of stderr, fd 5 a pipe the binary closes (binary://) or writes
// one byte to (binary-v2://) when it is ready.
func openBinary(_ context.Context, ns, id string, u *url.URL, up *Upstream) (retErr error) {
	var closers []func() error
	defer func() {
		if retErr != nil {
			for _, c := range closers {
				_ = c()
			}
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("logging binary %q: stdout pipe: %w", u.Path, err)
	}
	closers = append(closers, outR.Close, outW.Close)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("logging binary %q: stderr pipe: %w", u.Path, err)
	}
	closers = append(closers, errR.Close, errW.Close)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("logging binary %q: ready pipe: %w", u.Path, err)
	}
	closers = append(closers, readyR.Close, readyW.Close)

	var args []string
	for k, vs := range u.Query() {
		args = append(args, k)
		if len(vs) > 0 {
			args = append(args, vs[0])
		}
	}
	cmd := exec.Command(u.Path, args...)
	cmd.Env = append(os.Environ(), "CONTAINER_ID="+id, "CONTAINER_NAMESPACE="+ns)
	cmd.ExtraFiles = []*os.File{outR, errR, readyW}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start logging binary %q: %w", u.Path, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	closers = append(closers, func() error { return cmd.Process.Kill() })
	// Our copies of the child's ends.
	_ = outR.Close()
	_ = errR.Close()
	_ = readyW.Close()

	b := make([]byte, 1)
	n, err := readyR.Read(b)
	_ = readyR.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("logging binary %q: wait for ready: %w", u.Path, err)
	}
	if u.Scheme == schemeBinaryV2 && n == 0 {
		return fmt.Errorf("logging binary %q exited or closed fd 5 without signalling ready", u.Path)
	}
	up.Stdout, up.Stderr = outW, errW
	up.closers = append(up.closers, func() error {
		// The streams are closed by now (Upstream.Close closes them first): give the
		// binary time to flush, as runc's shim does, then stop it.
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
		return nil
	})
	return nil
}
