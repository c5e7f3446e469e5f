package hns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/testenv"
)

// The contract suite's environment on Linux: the hcsemu daemon built from ./cmd/hcsemu, run as
// a separate process on a temporary socket and root.

var (
	envOnce sync.Once
	envAddr string
	envErr  error
	envStop func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if envStop != nil {
		envStop()
	}
	os.Exit(code)
}

// requireContract returns a client of the shared daemon. It skips only when not root and not
// in CI (testenv); anything else that goes wrong fails the test.
func requireContract(t *testing.T) *Client {
	t.Helper()
	testenv.RequireRoot(t, "the HNS contract suite runs the hcsemu daemon, which makes network namespaces")
	envOnce.Do(func() { envAddr, envErr = startDaemon() })
	if envErr != nil {
		t.Fatalf("contract environment: %v", envErr)
	}
	api, err := client.DialHNS(envAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	return NewClient(api)
}

func startDaemon() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "hns-contract-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hcsemu")
	build := exec.Command("go", "build", "-o", bin, "./cmd/hcsemu")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hcsemu: %v: %s", err, out)
	}
	addr := filepath.Join(dir, "hcsemu.sock")
	logPath := filepath.Join(dir, "hcsemu.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "--address", addr, "--root", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", err
	}
	logf.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	envStop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if c, err := net.Dial("unix", addr); err == nil {
			c.Close()
			return addr, nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("hcsemu exited before serving; its log:\n%s", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(logPath)
	return "", fmt.Errorf("hcsemu not serving after 30s; its log:\n%s", b)
}
