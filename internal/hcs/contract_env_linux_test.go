package hcs

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
)

// The contract suite's environment on Linux: the hcsemu daemon built from ./cmd/hcsemu and run
// as a separate process on a temporary socket, and a test image (a folder holding the workload
// binary at workload\workload.exe) used as Container.Storage.Path.

var (
	envOnce sync.Once
	envVal  *contractEnv
	envErr  error
)

type contractEnv struct {
	hcs     *Client // this test's, made by requireContract
	dir     string  // temporary root of everything below
	addr    string  // daemon socket
	image   string  // Container.Storage.Path
	daemon  *exec.Cmd
	exited  chan error // the daemon's Wait
	logPath string
}

// requireContract returns the shared environment, starting it on first use. It skips the test
// only when not root and not in CI; anything else that goes wrong fails it.
func requireContract(t *testing.T) *contractEnv {
	t.Helper()
	testenv.RequireRoot(t, "the HCS contract suite runs the hcsemu daemon: chroot, cgroups")
	envOnce.Do(func() { envVal, envErr = startContractEnv() })
	if envErr != nil {
		t.Fatalf("contract environment: %v", envErr)
	}
	// Every test starts from a fresh client of the daemon.
	t.Setenv("HCSEMU_ADDRESS", envVal.addr)
	env := *envVal
	env.hcs = NewHostClient()
	return &env
}

// hostDir makes a host folder for a mapped directory: the test and hcsemu name it alike.
func (env *contractEnv) hostDir(t *testing.T) (local, host string) {
	d := t.TempDir()
	return d, d
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the module (go env GOMOD = %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}

func startContractEnv() (*contractEnv, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hcs-contract-")
	if err != nil {
		return nil, err
	}
	env := &contractEnv{dir: dir, addr: filepath.Join(dir, "hcsemu.sock"), image: filepath.Join(dir, "image"), logPath: filepath.Join(dir, "hcsemu.log")}
	contractTeardown = env.stop

	bin := filepath.Join(dir, "hcsemu")
	if err := goBuild(root, bin, "./cmd/hcsemu", nil); err != nil {
		return nil, err
	}
	if err := buildImage(root, env.image); err != nil {
		return nil, err
	}

	logf, err := os.Create(env.logPath)
	if err != nil {
		return nil, err
	}
	env.daemon = exec.Command(bin, "--address", env.addr, "--root", filepath.Join(dir, "state"))
	env.daemon.Stdout, env.daemon.Stderr = logf, logf
	if err := env.daemon.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	logf.Close()
	exited := make(chan error, 1)
	go func() { exited <- env.daemon.Wait() }()
	env.exited = exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", env.addr); err == nil {
			c.Close()
			return env, nil
		}
		select {
		case err := <-exited:
			env.daemon = nil // already waited for
			return nil, fmt.Errorf("hcsemu exited before serving (%v); its log:\n%s", err, env.log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("hcsemu not serving on %s after 30s; its log:\n%s", env.addr, env.log())
		}
	}
}

func (e *contractEnv) log() string {
	b, _ := os.ReadFile(e.logPath)
	return string(b)
}

func (e *contractEnv) stop() {
	if e.daemon != nil && e.daemon.Process != nil && e.exited != nil {
		_ = e.daemon.Process.Signal(os.Interrupt)
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
			_ = e.daemon.Process.Kill()
			<-e.exited
		}
	}
	// Mounts or cgroups the daemon left behind must not keep the folder; best effort.
	_ = os.RemoveAll(e.dir)
}

// goBuild builds pkg (relative to the module root) into out as a static Linux binary.
func goBuild(root, out, pkg string, extraEnv []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux"), extraEnv...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// buildImage makes the test image: ./test/workload at workload\workload.exe and
// Windows\System32\workload.exe, as in the test images of test/.
func buildImage(root, image string) error {
	exe := filepath.Join(image, "workload", "workload.exe")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		return err
	}
	if err := goBuild(root, exe, "./test/workload", nil); err != nil {
		return err
	}
	sys32 := filepath.Join(image, "Windows", "System32")
	if err := os.MkdirAll(sys32, 0o755); err != nil {
		return err
	}
	return copyFile(exe, filepath.Join(sys32, "workload.exe"))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
