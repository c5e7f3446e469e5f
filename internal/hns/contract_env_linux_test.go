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
	envDir  string // the daemon's folder: its root is state/, the workload program workload
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
	envDir = dir
	bin := filepath.Join(dir, "hcsemu")
	// The workload program serves and calls from the emulated host's namespaces in the
	// traffic tests (emulatedHost).
	for _, b := range [][2]string{{bin, "./cmd/hcsemu"}, {filepath.Join(dir, "workload"), "./test/workload"}} {
		build := exec.Command("go", "build", "-o", b[0], b[1])
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v: %s", b[1], err, out)
		}
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

// emulatedHost returns what the traffic tests need of the emulated Windows host: run, which
// runs a /bin/sh script in its network namespace (as hcsemu hostns does) and returns its
// output; hcsemu's root, under which <root>/netns/<namespace id> are the HNS namespaces'
// network namespaces; and the Linux workload program (test/workload).
func emulatedHost(t *testing.T) (run func(script string) (string, error), root, workload string) {
	t.Helper()
	requireContract(t)
	root = filepath.Join(envDir, "state")
	run = func(script string) (string, error) {
		out, err := exec.Command("nsenter", "--net="+filepath.Join(root, "netns", "host"), "/bin/sh", "-c", script).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%w: %s", err, out)
		}
		return string(out), nil
	}
	return run, root, filepath.Join(envDir, "workload")
}
