package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/testenv"
)

// Options tune Start. The zero value runs containerd as chosen by $RUNHCS_E2E_CONTAINERD
// (default 2.x), without CRI, and imports the default test image.
type Options struct {
	// Containerd is "2" or "1.7"; empty means $RUNHCS_E2E_CONTAINERD, else "2".
	Containerd string
	// EnableCRI keeps containerd's CRI plugin on (the CRI suites need it).
	EnableCRI bool
	// ExtraConfig is TOML appended to the generated containerd config, with full table paths
	// (e.g. [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runhcs-wcow-process]).
	ExtraConfig string
	// HCSEmuArgs are extra arguments for hcsemu.
	HCSEmuArgs []string
	// SnapshotterArgs are extra arguments for containerd-wcow-snapshotter.
	SnapshotterArgs []string
	// ContainerdEnv are extra NAME=VALUE environment variables of containerd, which the shims
	// it starts inherit (e.g. HCSSHIM_TIMEOUT_SECONDS).
	ContainerdEnv []string
	// NoImage skips importing the default test image.
	NoImage bool
	// Progress, if set, gets a line per step of New (the demo prints them).
	Progress io.Writer
}

// Env is one running environment. Its fields are read-only.
type Env struct {
	Root string // the temporary root; everything lives under it
	// ContainerdVersion is "2" or "1.7".
	ContainerdVersion string
	// Sockets.
	Address, HCSEmuAddress, SnapshotterAddress string
	// Bin holds the paths of the binaries in use.
	Bin Binaries
	// Image is the reference of the imported default test image (empty with NoImage).
	Image string

	mu        sync.Mutex
	daemons   []*daemon
	clients   []*containerd.Client
	closeOnce sync.Once
}

// daemon is one started process and its log.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process exited
	err  error         // its Wait error, after done
}

// envs are the live environments, for Main's signal handler.
var (
	envsMu sync.Mutex
	envs   = map[*Env]bool{}
)

// RequireRoot skips t when not root, unless CI is "true", where it fails: end-to-end tests
// never skip in CI.
func RequireRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "end-to-end tests: mounts, chroot, cgroups")
}

// ContainerdVersion is the version Start runs when Options.Containerd is empty.
func ContainerdVersion() string {
	if v := os.Getenv("RUNHCS_E2E_CONTAINERD"); v != "" {
		return v
	}
	return "2"
}

// Start is New for a test: it fails t if the environment does not come up and registers Close
// with t.Cleanup, which prints the daemon log tails when t failed.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var e *Env
	e, err := New(ctx, o, func(env *Env) {
		e = env
		t.Cleanup(func() {
			env.Close(t.Failed())
			if left := env.Leftovers(); len(left) > 0 {
				t.Errorf("harness: the environment could not be removed: %q", left)
			}
		})
	})
	if err != nil {
		// Close, registered above, prints the daemon logs.
		t.Fatalf("harness: %v", err)
	}
	return e
}

// New builds (or finds) the binaries, starts hcsemu, the snapshotter and containerd under a new
// temporary root, waits until each answers and imports the default test image (unless
// o.NoImage). registered, if not nil, is called with the environment before the first process
// starts, so a caller can arrange for Close even if New fails half way; New itself closes the
// environment when it fails and registered is nil. Progress goes to o.Progress.
func New(ctx context.Context, o Options, registered func(*Env)) (_ *Env, err error) {
	version := o.Containerd
	if version == "" {
		version = ContainerdVersion()
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	bins, err := binaries(version)
	if err != nil {
		return nil, err
	}
	// A short root: unix socket paths must stay under 108 bytes, and t.TempDir's names are long.
	root, err := os.MkdirTemp("", "runhcs-e2e-")
	if err != nil {
		return nil, err
	}
	e := &Env{
		Root:               root,
		ContainerdVersion:  version,
		Address:            filepath.Join(root, "containerd.sock"),
		HCSEmuAddress:      filepath.Join(root, "hcsemu.sock"),
		SnapshotterAddress: filepath.Join(root, "wcow.sock"),
		Bin:                bins,
	}
	envsMu.Lock()
	envs[e] = true
	envsMu.Unlock()
	if registered != nil {
		registered(e)
	} else {
		defer func() {
			if err != nil {
				e.Close(true)
			}
		}()
	}
	progress("runhcs: temporary root %s", root)

	if err := os.MkdirAll(filepath.Join(root, "logs"), 0o755); err != nil {
		return e, err
	}
	// Debug logs: their tails are what a failed test prints.
	hcsemu := append([]string{"--address", e.HCSEmuAddress, "--root", e.HCSEmuRoot(), "--log-level", "debug"}, o.HCSEmuArgs...)
	if err := e.startDaemon(ctx, "hcsemu", bins.HCSEmu, hcsemu, nil, e.HCSEmuAddress); err != nil {
		return e, err
	}
	progress("runhcs: hcsemu listening on %s", e.HCSEmuAddress)
	// The differ reads layer blobs from containerd's content store, so it gets containerd's
	// address; it dials when a diff is applied, by which time containerd is up.
	snap := append([]string{"--address", e.SnapshotterAddress, "--root", filepath.Join(root, "wcow"),
		"--containerd-address", e.Address, "--log-level", "debug"}, o.SnapshotterArgs...)
	if err := e.startDaemon(ctx, "snapshotter", bins.Snapshotter, snap, nil, e.SnapshotterAddress); err != nil {
		return e, err
	}
	progress("runhcs: containerd-wcow-snapshotter listening on %s", e.SnapshotterAddress)

	cfg, err := containerdConfig(configParams{
		Version:         version,
		Root:            filepath.Join(root, "containerd", "root"),
		State:           filepath.Join(root, "containerd", "state"),
		Temp:            filepath.Join(root, "containerd", "tmp"),
		Address:         e.Address,
		TTRPCAddress:    e.Address + ".ttrpc",
		DebugAddress:    filepath.Join(root, "containerd-debug.sock"),
		SnapshotterAddr: e.SnapshotterAddress,
		OptDir:          filepath.Join(root, "containerd", "opt"),
		EnableCRI:       o.EnableCRI,
		Extra:           o.ExtraConfig,
	})
	if err != nil {
		return e, err
	}
	cfgPath := filepath.Join(root, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return e, err
	}
	// The shims containerd starts find hcsemu through HCSEMU_ADDRESS, its emulated host (the
	// host network namespace HostProcess containers run in) through HCSEMU_ROOT
	// (layout.RootEnv), and are found on PATH.
	daemonEnv := []string{
		"HCSEMU_ADDRESS=" + e.HCSEmuAddress,
		layout.RootEnv + "=" + e.HCSEmuRoot(),
		"PATH=" + filepath.Dir(bins.Shim) + ":" + os.Getenv("PATH"),
	}
	daemonEnv = append(daemonEnv, o.ContainerdEnv...)
	if err := e.startDaemon(ctx, "containerd", bins.Containerd, []string{"--config", cfgPath}, daemonEnv, e.Address); err != nil {
		return e, err
	}
	if _, stderr, err := e.Ctr(ctx, "version"); err != nil {
		return e, fmt.Errorf("containerd at %s does not answer: %w: %s", e.Address, err, stderr)
	}
	progress("runhcs: containerd %s listening on %s (config %s)", version, e.Address, cfgPath)
	if !o.NoImage {
		path, err := DefaultImage()
		if err != nil {
			return e, err
		}
		if err := e.ImportImage(ctx, path); err != nil {
			return e, err
		}
		e.Image = defaultImageName
		progress("runhcs: imported %s into snapshotter %s", e.Image, Snapshotter)
	}
	return e, nil
}

// startDaemon starts one daemon with its output in logs/<name>.log and waits until socket accepts
// connections, failing early if the process exits.
func (e *Env) startDaemon(ctx context.Context, name, bin string, args, env []string, socket string) error {
	logPath := filepath.Join(e.Root, "logs", name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = e.Root
	// Its own process group, so cleanup can signal what it forked too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	d := &daemon{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.mu.Lock()
	e.daemons = append(e.daemons, d)
	e.mu.Unlock()

	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%s exited before listening on %s: %v\n%s", name, socket, d.err, tail(logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen on %s in time\n%s", name, socket, tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ctr runs ctr against this environment's containerd, in Namespace, and returns its output.
// A non-zero exit is an *exec.ExitError.
func (e *Env) Ctr(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return e.CtrInput(ctx, nil, args...)
}

// CtrInput is Ctr with stdin.
func (e *Env) CtrInput(ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	return e.ctr(ctx, e.Bin.Ctr, stdin, args...)
}

func (e *Env) ctr(ctx context.Context, bin string, stdin []byte, args ...string) (stdout, stderr string, err error) {
	full := append([]string{"--address", e.Address, "--namespace", Namespace}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	return o.String(), se.String(), err
}

// RunResult is what a container run with ctr produced.
type RunResult struct {
	Stdout, Stderr string
	ExitCode       int // the container's exit code (ctr exits with it), -1 if ctr was killed
}

// CtrRun runs `ctr run --rm` of the test image (or image, when non-empty) with the runhcs runtime and
// the wcow snapshotter, and args as the command (none: the image's default). extra are ctr run
// flags placed before the image. err is set only when ctr could not be run at all. The ctr is
// Bin.RunCtr (see Binaries).
func (e *Env) CtrRun(ctx context.Context, id, image string, extra []string, args ...string) (RunResult, error) {
	return e.CtrRunInput(ctx, nil, id, image, extra, args...)
}

// CtrRunInput is CtrRun with stdin for the container.
func (e *Env) CtrRunInput(ctx context.Context, stdin []byte, id, image string, extra []string, args ...string) (RunResult, error) {
	if image == "" {
		image = e.Image
	}
	full := []string{"run", "--rm", "--runtime", Runtime, "--snapshotter", Snapshotter, "--platform", Platform}
	full = append(full, extra...)
	full = append(full, image, id)
	full = append(full, args...)
	stdout, stderr, err := e.ctr(ctx, e.Bin.RunCtr, stdin, full...)
	res := RunResult{Stdout: stdout, Stderr: dropCtrWarnings(stderr)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	default:
		return res, fmt.Errorf("ctr run %s: %w", id, err)
	}
	return res, nil
}

// dropCtrWarnings removes ctr's own deprecation warnings (containerd 2.x ctr warns about cgroup v1
// on every start) from a container's stderr, so tests can compare it.
func dropCtrWarnings(stderr string) string {
	if !strings.Contains(stderr, `msg="DEPRECATION:`) {
		return stderr
	}
	lines := strings.SplitAfter(stderr, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(l, `time="`) && strings.Contains(l, `level=warning msg="DEPRECATION:`) {
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "")
}

// ImportImage imports an OCI image tarball for the Windows platform, unpacked into the wcow
// snapshotter.
func (e *Env) ImportImage(ctx context.Context, path string) error {
	_, stderr, err := e.Ctr(ctx, "image", "import", "--platform", Platform, "--snapshotter", Snapshotter, path)
	if err != nil {
		return fmt.Errorf("ctr image import %s: %w: %s", path, err, strings.TrimSpace(stderr))
	}
	return nil
}

// ImportImageTransfer imports like ImportImage but with containerd 2.x's ctr (RunCtr), whose
// `image import` goes through the daemon's transfer service and so its unpack_config, for either
// daemon version: what docs/getting-started.md recommends for running Windows images on Linux.
func (e *Env) ImportImageTransfer(ctx context.Context, path string) error {
	_, stderr, err := e.ctr(ctx, e.Bin.RunCtr, nil, "image", "import", "--platform", Platform, "--snapshotter", Snapshotter, path)
	if err != nil {
		return fmt.Errorf("ctr (2.x) image import %s: %w: %s", path, err, strings.TrimSpace(stderr))
	}
	return nil
}

// Client returns a containerd Go client of this environment (namespace Namespace), closed by
// Close; it fails t if containerd does not answer.
func (e *Env) Client(t testing.TB) *containerd.Client {
	t.Helper()
	c, err := containerd.New(e.Address, containerd.WithDefaultNamespace(Namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("harness: containerd client for %s: %v", e.Address, err)
	}
	e.mu.Lock()
	e.clients = append(e.clients, c)
	e.mu.Unlock()
	return c
}

// Context returns ctx in the harness's namespace, for the Go client.
func Context(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, Namespace)
}

// LogTails returns the last n lines of every daemon log (containerd's includes the shims').
func (e *Env) LogTails(n int) string {
	e.mu.Lock()
	ds := append([]*daemon(nil), e.daemons...)
	e.mu.Unlock()
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "===== %s (%s), last %d lines =====\n%s\n", d.name, d.log, n, tail(d.log, n))
	}
	return b.String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
