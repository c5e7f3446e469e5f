package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/test/image"
)

// Binaries are the programs an environment runs.
type Binaries struct {
	Shim, Snapshotter, HCSEmu string
	// Containerd and Ctr are of the version under test.
	Containerd, Ctr string
	// RunCtr is the ctr that `ctr run` uses: containerd 2.x's for both versions. containerd 1.7's
	// ctr on Linux always builds a Linux spec (cmd/ctr/commands/run/run_unix.go: oci.WithDefaultSpec,
	// no --platform), and its client then mounts the rootfs to read /etc/group
	// (oci.WithAdditionalGIDs), which fails for windows-layer mounts; on Windows, 1.7's ctr builds
	// a Windows spec. The 2.x ctr builds one from --platform windows/amd64, and talks to a 1.7
	// daemon through the same API.
	RunCtr string
}

// The three runhcs commands, by binary name.
var commands = map[string]string{
	"containerd-shim-runhcs-v1":   "./cmd/containerd-shim-runhcs-v1",
	"containerd-wcow-snapshotter": "./cmd/containerd-wcow-snapshotter",
	"hcsemu":                      "./cmd/hcsemu",
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error

	toolsMu sync.Mutex
	tools   = map[string][2]string{} // version → containerd, ctr

	imageOnce sync.Once
	imagePath string
	imageErr  error
)

const defaultImageName = image.DefaultName

// RepoRoot is the root of the runhcs checkout the tests run in.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the runhcs module (go env GOMOD is empty)")
	}
	return filepath.Dir(mod), nil
}

// binaries returns the runhcs commands ($RUNHCS_BIN, or built once per test binary from this
// checkout, so a test never runs stale binaries) and the containerd and ctr of version.
func binaries(version string) (Binaries, error) {
	var b Binaries
	dir := os.Getenv("RUNHCS_BIN")
	if dir == "" {
		buildOnce.Do(func() { buildDir, buildErr = buildCommands() })
		if buildErr != nil {
			return b, buildErr
		}
		dir = buildDir
	}
	b.Shim = filepath.Join(dir, "containerd-shim-runhcs-v1")
	b.Snapshotter = filepath.Join(dir, "containerd-wcow-snapshotter")
	b.HCSEmu = filepath.Join(dir, "hcsemu")
	for _, p := range []string{b.Shim, b.Snapshotter, b.HCSEmu} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("runhcs binary missing (RUNHCS_BIN=%q): %w", os.Getenv("RUNHCS_BIN"), err)
		}
	}
	var err error
	if b.Containerd, b.Ctr, err = containerdTools(version); err != nil {
		return b, err
	}
	b.RunCtr = b.Ctr
	if version != "2" {
		_, b.RunCtr, err = containerdTools("2")
	}
	return b, err
}

// scratchDir is this process's folder for what the harness builds: <tmp>/runhcs-e2e-build/<pid>.
// A test binary killed before Main's RemoveBuilds (or one without Main) leaves its folder
// behind; the first scratchDir call of a later process removes the folders of dead processes.
func scratchDir(name string) (string, error) {
	base := filepath.Join(os.TempDir(), "runhcs-e2e-build")
	reapOnce.Do(func() {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if syscall.Kill(pid, 0) == syscall.ESRCH {
				os.RemoveAll(filepath.Join(base, e.Name()))
			}
		}
	})
	dir := filepath.Join(base, strconv.Itoa(os.Getpid()), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

var reapOnce sync.Once

func buildCommands() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := scratchDir("bin")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for name, pkg := range commands {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	return dir, nil
}

// RemoveBuilds removes what the harness built into temporary folders (the runhcs binaries when
// RUNHCS_BIN is unset, the test image and workload). Main calls it after the tests; programs that
// use New directly call it before they exit.
func RemoveBuilds() {
	base := filepath.Join(os.TempDir(), "runhcs-e2e-build")
	os.RemoveAll(filepath.Join(base, strconv.Itoa(os.Getpid())))
	os.Remove(base) // only if no other test process uses it
}

// containerdTools returns containerd and ctr of version: the pinned builds of hack/tools.sh (built
// into its cache on first use), or $RUNHCS_CONTAINERD and $RUNHCS_CTR for the version under test
// when both are set.
func containerdTools(version string) (string, string, error) {
	if c, r := os.Getenv("RUNHCS_CONTAINERD"), os.Getenv("RUNHCS_CTR"); c != "" && r != "" && version == ContainerdVersion() {
		return c, r, nil
	}
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if t, ok := tools[version]; ok {
		return t[0], t[1], nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	script := filepath.Join(root, "hack", "tools.sh")
	target, cname, ctrname := "containerd", "containerd", "ctr"
	switch version {
	case "2":
	case "1.7":
		target, cname, ctrname = "containerd1.7", "containerd1.7", "ctr1.7"
	default:
		return "", "", fmt.Errorf("containerd version %q: want 2 or 1.7", version)
	}
	if out, err := exec.Command("bash", script, target).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("%s %s: %w\n%s", script, target, err, out)
	}
	path := func(name string) (string, error) {
		out, err := exec.Command("bash", script, "path", name).Output()
		return strings.TrimSpace(string(out)), err
	}
	c, err := path(cname)
	if err != nil {
		return "", "", err
	}
	r, err := path(ctrname)
	if err != nil {
		return "", "", err
	}
	tools[version] = [2]string{c, r}
	return c, r, nil
}

// DefaultImage returns the path of the default test image tarball (image.Default with the Linux
// build of the workload), written once per test binary.
func DefaultImage() (string, error) {
	imageOnce.Do(func() {
		dir, err := scratchDir("image")
		if err != nil {
			imageErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		bin := filepath.Join(dir, "workload")
		if err := image.BuildWorkload(ctx, "linux", "amd64", bin); err != nil {
			imageErr = err
			return
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			imageErr = err
			return
		}
		p := filepath.Join(dir, "test.tar")
		if err := image.Default(data).WriteFile(p); err != nil {
			imageErr = err
			return
		}
		imagePath = p
	})
	return imagePath, imageErr
}

// Workload returns the Linux build of the workload, for tests that make their own images.
func Workload() ([]byte, error) {
	p, err := DefaultImage()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(filepath.Dir(p), "workload"))
}
