package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The runc side. containerd 2.x has the io.containerd.runc.v2 runtime built in: it only needs the
// shim binary on its PATH and runc on the shim's.
const (
	runcRuntime     = "io.containerd.runc.v2"
	runcShimBinary  = "containerd-shim-runc-v2"
	runcSnapshotter = "overlayfs" // containerd's default on Linux
	linuxPlatform   = "linux/amd64"
	linuxImageName  = "docker.io/runhcs/bench-linux:latest"
	// envRuncShim names the containerd-shim-runc-v2 to use (hack/bench-shim.sh sets it); without
	// it the shim must already be on PATH.
	envRuncShim = "RUNHCS_BENCH_RUNC_SHIM"
)

// opTimeout bounds one lifecycle or one exec: far above either's latency, so only a hang hits it.
const opTimeout = 2 * time.Minute

// side is one runtime under test: what containerd is asked to run and how its shim is found.
type side struct {
	name        string // "runhcs" or "runc", as the table prints it
	runtime     string
	snapshotter string
	platform    string
	shimBinary  string // base name of the shim's executable
	workload    string // the workload's path as the container's OS names it
	// cgroupParent, if set, is the cgroup (under every hierarchy) the side's containers get a
	// group in, so that what runc leaves behind can be removed; runhcs's groups are hcsemu's.
	cgroupParent string
	image        containerd.Image
	// sleeper is a task left running for the exec measurements.
	sleeper *sleeper
}

// specOpts builds the same minimal spec for both sides: the platform's default spec and the
// workload's command line. Image config opts are left out on purpose: on Linux they mount the
// rootfs in the client to read /etc/group, which would charge runc's side for client work.
func (s *side) specOpts(args ...string) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithDefaultSpecForPlatform(s.platform),
		oci.WithProcessArgs(append([]string{s.workload}, args...)...),
	}
	if s.cgroupParent != "" {
		opts = append(opts, func(_ context.Context, _ oci.Client, c *containers.Container, spec *oci.Spec) error {
			if spec.Linux == nil {
				return fmt.Errorf("container %s: a cgroup parent needs a Linux spec", c.ID)
			}
			spec.Linux.CgroupsPath = "/" + s.cgroupParent + "/" + c.ID
			return nil
		})
	}
	return opts
}

// sleeper is a running task of `workload sleep`, exec'd into.
type sleeper struct {
	container containerd.Container
	task      containerd.Task
	process   specs.Process // the init process's spec, the template of every exec
	rssStart  int64         // the serving shim's VmRSS in KiB right after Start
}

// suite is what BenchmarkShim's sub-benchmarks share.
type suite struct {
	env    *harness.Env
	client *containerd.Client
	sides  []*side // runhcs first, then runc
	fifo   string
	seq    atomic.Int64 // makes container and exec ids unique
}

// phases are the parts of one lifecycle. Their sum is the end-to-end latency; the RSS read
// between exit and task delete is outside every phase.
type phases struct {
	create     time.Duration // NewContainer: snapshot prepare and container record
	newTask    time.Duration // NewTask: the shim is started and creates the task
	start      time.Duration // Wait subscription and Start
	exit       time.Duration // from Start's return to the exit status
	deleteTask time.Duration // task delete (stdio drained, shim shut down)
	deleteCtr  time.Duration // container delete with its snapshot
}

func (p phases) total() time.Duration {
	return p.create + p.newTask + p.start + p.exit + p.deleteTask + p.deleteCtr
}

// BenchmarkShim compares runhcs with containerd-shim-runc-v2 under one containerd; see the
// package documentation. hack/bench-shim.sh runs its compare sub-benchmark.
func BenchmarkShim(b *testing.B) {
	harness.RequireRoot(b)
	shim, err := runcShim()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		b.Fatalf("runc is not on PATH (%v): install it (apt-get install -y runc) or run hack/bench-shim.sh", err)
	}
	// The harness gives containerd the PATH of this process, after the runhcs binaries' folder,
	// and containerd looks the runc shim up on it.
	b.Setenv("PATH", filepath.Dir(shim)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// runc's containers get their cgroups under a parent of this run's, removed after the
	// harness's Close (cleanups run last first) has removed every container.
	cgroupParent := "runhcs-bench-" + strconv.Itoa(os.Getpid())
	b.Cleanup(func() { removeCgroups(b, cgroupParent) })
	env := harness.Start(b, harness.Options{Containerd: "2"})

	// Setup is bounded as a whole; each measured operation bounds itself (opTimeout), so the
	// number of rounds is not.
	ctx := harness.Context(context.Background())
	setup, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	s := &suite{env: env, client: env.Client(b), fifo: filepath.Join(env.Root, "fifo")}
	runhcs := &side{
		name: "runhcs", runtime: harness.Runtime, snapshotter: harness.Snapshotter,
		platform: harness.Platform, shimBinary: filepath.Base(env.Bin.Shim), workload: image.WorkloadPath,
	}
	runc := &side{
		name: "runc", runtime: runcRuntime, snapshotter: runcSnapshotter,
		platform: linuxPlatform, shimBinary: runcShimBinary, workload: linuxWorkloadPath,
		cgroupParent: cgroupParent,
	}
	s.sides = []*side{runhcs, runc}

	img, err := s.client.GetImage(setup, env.Image)
	if err != nil {
		b.Fatalf("runhcs test image %s: %v", env.Image, err)
	}
	runhcs.image = containerd.NewImageWithPlatform(s.client, img.Metadata(), platforms.Only(platforms.MustParse(harness.Platform)))
	if runc.image, err = s.importLinuxImage(setup); err != nil {
		b.Fatal(err)
	}
	for _, sd := range s.sides {
		if sd.sleeper, err = s.startSleeper(setup, b, sd); err != nil {
			b.Fatal(err)
		}
	}
	// One untimed lifecycle and exec per side: the first of each pages in binaries and fills
	// caches, which no later round pays.
	for _, sd := range s.sides {
		if _, _, err := s.lifecycle(ctx, sd); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
		if _, err := s.exec(ctx, sd); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}

	for _, sd := range s.sides {
		b.Run("run/"+sd.name, func(b *testing.B) {
			var totals []time.Duration
			for b.Loop() {
				p, _, err := s.lifecycle(ctx, sd)
				if err != nil {
					b.Fatal(err)
				}
				totals = append(totals, p.total())
			}
			b.ReportMetric(msOf(percentile(totals, 50)), "p50-ms")
			b.ReportMetric(msOf(percentile(totals, 90)), "p90-ms")
		})
	}
	for _, sd := range s.sides {
		b.Run("exec/"+sd.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				d, err := s.exec(ctx, sd)
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, d)
			}
			b.ReportMetric(msOf(percentile(ds, 50)), "p50-ms")
			b.ReportMetric(msOf(percentile(ds, 90)), "p90-ms")
		})
	}
	b.Run("compare", func(b *testing.B) { s.compare(ctx, b) })
}

// samples are what compare collects for one side.
type samples struct {
	runs  []phases
	execs []time.Duration
	rss   []int64 // KiB, the serving shim after its task ran
}

// compare runs rounds of: one lifecycle per side, then one exec per side, the order of the sides
// flipped every round so that drift and whatever the previous operation left behind hit both
// alike. It prints the table and reports the ratios as metrics.
func (s *suite) compare(ctx context.Context, b *testing.B) {
	got := map[string]*samples{}
	for _, sd := range s.sides {
		got[sd.name] = &samples{}
	}
	round := 0
	for b.Loop() {
		order := s.sides
		if round%2 == 1 {
			order = []*side{s.sides[1], s.sides[0]}
		}
		round++
		for _, sd := range order {
			p, rss, err := s.lifecycle(ctx, sd)
			if err != nil {
				b.Fatal(err)
			}
			got[sd.name].runs = append(got[sd.name].runs, p)
			got[sd.name].rss = append(got[sd.name].rss, rss)
		}
		for _, sd := range order {
			d, err := s.exec(ctx, sd)
			if err != nil {
				b.Fatal(err)
			}
			got[sd.name].execs = append(got[sd.name].execs, d)
		}
	}
	b.StopTimer()
	s.printTable(b, round, got)
}

// printTable writes the comparison to stdout and reports the headline ratios as metrics.
func (s *suite) printTable(b *testing.B, rounds int, got map[string]*samples) {
	a, r := got["runhcs"], got["runc"]
	var out strings.Builder
	row := func(what string, x, y float64, unit string) {
		fmt.Fprintf(&out, "%-34s %10.1f %10.1f %8s   %s\n", what, x, y, ratio(x, y), unit)
	}
	phase := func(f func(phases) time.Duration, runs []phases, p float64) float64 {
		ds := make([]time.Duration, len(runs))
		for i, x := range runs {
			ds[i] = f(x)
		}
		return msOf(percentile(ds, p))
	}
	version := "2.x"
	if v, err := s.client.Version(harness.Context(context.Background())); err == nil {
		version = v.Version
	}
	fmt.Fprintf(&out, "\nrunhcs vs containerd-shim-runc-v2, containerd %s, %d interleaved rounds (%s)\n",
		version, rounds, runcVersion())
	fmt.Fprintf(&out, "%-34s %10s %10s %8s\n", "", "runhcs", "runc", "ratio")
	for _, p := range []float64{50, 90} {
		row(fmt.Sprintf("run echo x end to end, p%v", p), phase(phases.total, a.runs, p), phase(phases.total, r.runs, p), "ms")
	}
	for _, ph := range []struct {
		name string
		f    func(phases) time.Duration
	}{
		{"  create container (snapshot)", func(p phases) time.Duration { return p.create }},
		{"  create task (shim start)", func(p phases) time.Duration { return p.newTask }},
		{"  start", func(p phases) time.Duration { return p.start }},
		{"  start → exit event", func(p phases) time.Duration { return p.exit }},
		{"  delete task", func(p phases) time.Duration { return p.deleteTask }},
		{"  delete container (snapshot)", func(p phases) time.Duration { return p.deleteCtr }},
	} {
		row(ph.name+", p50", phase(ph.f, a.runs, 50), phase(ph.f, r.runs, 50), "ms")
	}
	for _, p := range []float64{50, 90} {
		row(fmt.Sprintf("exec echo x, p%v", p), msOf(percentile(a.execs, p)), msOf(percentile(r.execs, p)), "ms")
	}
	row("shim RSS after start, p50", mibOf(percentile(a.rss, 50)), mibOf(percentile(r.rss, 50)), "MiB")
	ra, rr := s.sides[0].sleeper, s.sides[1].sleeper
	row("sleeper shim RSS after start", mibOf(ra.rssStart), mibOf(rr.rssStart), "MiB")
	nowA, errA := shimRSS(s.env, s.sides[0].shimBinary, ra.container.ID())
	nowR, errR := shimRSS(s.env, s.sides[1].shimBinary, rr.container.ID())
	if errA == nil && errR == nil {
		row("sleeper shim RSS after its execs", mibOf(nowA), mibOf(nowR), "MiB")
	}
	if kib, err := vmRSS(s.env.DaemonPid(harness.DaemonHCSEmu)); err == nil {
		fmt.Fprintf(&out, "hcsemu RSS now: %.1f MiB (shared by every runhcs shim; not in the ratios, runc has no such daemon)\n", mibOf(kib))
	}
	fmt.Fprint(os.Stdout, out.String())

	b.ReportMetric(phase(phases.total, a.runs, 50)/phase(phases.total, r.runs, 50), "run-p50-ratio")
	b.ReportMetric(msOf(percentile(a.execs, 50))/msOf(percentile(r.execs, 50)), "exec-p50-ratio")
	b.ReportMetric(mibOf(percentile(a.rss, 50))/mibOf(percentile(r.rss, 50)), "rss-ratio")
}

// lifecycle runs `workload echo x` in a new container of sd and removes it: the end-to-end
// latency by phase, and the serving shim's VmRSS (KiB) read after the exit, before the delete.
func (s *suite) lifecycle(ctx context.Context, sd *side) (p phases, rssKiB int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	id := fmt.Sprintf("bench-%s-run-%d", sd.name, s.seq.Add(1))
	defer func() {
		if err != nil {
			s.remove(id)
		}
	}()

	t0 := time.Now()
	c, err := s.client.NewContainer(ctx, id,
		containerd.WithImage(sd.image),
		containerd.WithSnapshotter(sd.snapshotter),
		containerd.WithNewSnapshot(id+"-rootfs", sd.image),
		containerd.WithRuntime(sd.runtime, nil),
		containerd.WithNewSpec(sd.specOpts("echo", "x")...),
	)
	if err != nil {
		return p, 0, fmt.Errorf("%s: create container %s: %w", sd.name, id, err)
	}
	t1 := time.Now()
	var stdout, stderr bytes.Buffer
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr), cio.WithFIFODir(s.fifo)))
	if err != nil {
		return p, 0, fmt.Errorf("%s: create task %s: %w", sd.name, id, err)
	}
	t2 := time.Now()
	exitCh, err := task.Wait(ctx)
	if err != nil {
		return p, 0, fmt.Errorf("%s: wait task %s: %w", sd.name, id, err)
	}
	if err := task.Start(ctx); err != nil {
		return p, 0, fmt.Errorf("%s: start task %s: %w", sd.name, id, err)
	}
	t3 := time.Now()
	var st containerd.ExitStatus
	select {
	case st = <-exitCh:
	case <-ctx.Done():
		return p, 0, fmt.Errorf("%s: task %s did not exit: %w", sd.name, id, ctx.Err())
	}
	t4 := time.Now()
	// The serving shim lives until the task is deleted; reading it here keeps /proc's scan out
	// of every phase.
	rssKiB, err = shimRSS(s.env, sd.shimBinary, id)
	if err != nil {
		return p, 0, fmt.Errorf("%s: %w", sd.name, err)
	}
	t5 := time.Now()
	if _, err := task.Delete(ctx); err != nil {
		return p, 0, fmt.Errorf("%s: delete task %s: %w", sd.name, id, err)
	}
	t6 := time.Now()
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return p, 0, fmt.Errorf("%s: delete container %s: %w", sd.name, id, err)
	}
	t7 := time.Now()
	p = phases{create: t1.Sub(t0), newTask: t2.Sub(t1), start: t3.Sub(t2), exit: t4.Sub(t3), deleteTask: t6.Sub(t5), deleteCtr: t7.Sub(t6)}

	// Check that the program really ran, so a fast failure is not measured as a fast run.
	code, _, err := st.Result()
	if err != nil || code != 0 || strings.TrimSpace(stdout.String()) != "x" {
		return p, 0, fmt.Errorf("%s: task %s: exit %d (%v), stdout %q, stderr %q; want exit 0 and \"x\"", sd.name, id, code, err, stdout.String(), stderr.String())
	}
	return p, rssKiB, nil
}

// exec runs `workload echo x` as a new exec in sd's sleeper, to its exit and delete, and returns
// how long that took.
func (s *suite) exec(ctx context.Context, sd *side) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	sl := sd.sleeper
	id := fmt.Sprintf("exec-%d", s.seq.Add(1))
	spec := sl.process
	spec.Args = append([]string{sd.workload}, "echo", "x")
	var stdout, stderr bytes.Buffer

	t0 := time.Now()
	p, err := sl.task.Exec(ctx, id, &spec, cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr), cio.WithFIFODir(s.fifo)))
	if err != nil {
		return 0, fmt.Errorf("%s: exec %s in %s: %w", sd.name, id, sl.container.ID(), err)
	}
	exitCh, err := p.Wait(ctx)
	if err != nil {
		_, _ = p.Delete(ctx, containerd.WithProcessKill)
		return 0, fmt.Errorf("%s: wait exec %s: %w", sd.name, id, err)
	}
	if err := p.Start(ctx); err != nil {
		_, _ = p.Delete(ctx, containerd.WithProcessKill)
		return 0, fmt.Errorf("%s: start exec %s: %w", sd.name, id, err)
	}
	var st containerd.ExitStatus
	select {
	case st = <-exitCh:
	case <-ctx.Done():
		_, _ = p.Delete(context.WithoutCancel(ctx), containerd.WithProcessKill)
		return 0, fmt.Errorf("%s: exec %s did not exit: %w", sd.name, id, ctx.Err())
	}
	if _, err := p.Delete(ctx); err != nil {
		return 0, fmt.Errorf("%s: delete exec %s: %w", sd.name, id, err)
	}
	d := time.Since(t0)

	code, _, err := st.Result()
	if err != nil || code != 0 || strings.TrimSpace(stdout.String()) != "x" {
		return 0, fmt.Errorf("%s: exec %s: exit %d (%v), stdout %q, stderr %q; want exit 0 and \"x\"", sd.name, id, code, err, stdout.String(), stderr.String())
	}
	return d, nil
}

// startSleeper starts a long-running `workload sleep` task of sd, removed when b ends.
func (s *suite) startSleeper(ctx context.Context, b *testing.B, sd *side) (*sleeper, error) {
	id := "bench-" + sd.name + "-sleeper"
	c, err := s.client.NewContainer(ctx, id,
		containerd.WithImage(sd.image),
		containerd.WithSnapshotter(sd.snapshotter),
		containerd.WithNewSnapshot(id+"-rootfs", sd.image),
		containerd.WithRuntime(sd.runtime, nil),
		containerd.WithNewSpec(sd.specOpts("sleep", "3600")...),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: create container %s: %w", sd.name, id, err)
	}
	b.Cleanup(func() { s.remove(id) })
	spec, err := c.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: spec of %s: %w", sd.name, id, err)
	}
	task, err := c.NewTask(ctx, cio.NullIO)
	if err != nil {
		return nil, fmt.Errorf("%s: create task %s: %w", sd.name, id, err)
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("%s: start task %s: %w", sd.name, id, err)
	}
	rss, err := shimRSS(s.env, sd.shimBinary, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sd.name, err)
	}
	return &sleeper{container: c, task: task, process: *spec.Process, rssStart: rss}, nil
}

// remove kills and deletes a container's task and the container with its snapshot; what is
// gone already is fine. The harness's Close removes whatever this misses.
func (s *suite) remove(id string) {
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 30*time.Second)
	defer cancel()
	c, err := s.client.LoadContainer(ctx, id)
	if err != nil {
		return
	}
	if task, err := c.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "bench: delete task %s: %v\n", id, err)
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "bench: delete container %s: %v\n", id, err)
	}
}

// importLinuxImage imports the Linux twin of the test image (same workload binary) and unpacks
// it into overlayfs. The client imports and unpacks, not ctr: the harness's transfer-service
// unpack config names only the Windows platform.
func (s *suite) importLinuxImage(ctx context.Context) (containerd.Image, error) {
	workload, err := harness.Workload()
	if err != nil {
		return nil, err
	}
	tarball, err := linuxImage(linuxImageName, workload)
	if err != nil {
		return nil, err
	}
	linux := platforms.Only(platforms.MustParse(linuxPlatform))
	if _, err := s.client.Import(ctx, bytes.NewReader(tarball), containerd.WithImportPlatform(linux)); err != nil {
		return nil, fmt.Errorf("import %s: %w", linuxImageName, err)
	}
	img, err := s.client.GetImage(ctx, linuxImageName)
	if err != nil {
		return nil, fmt.Errorf("imported image %s: %w", linuxImageName, err)
	}
	img = containerd.NewImageWithPlatform(s.client, img.Metadata(), linux)
	if err := img.Unpack(ctx, runcSnapshotter); err != nil {
		return nil, fmt.Errorf("unpack %s into %s: %w", linuxImageName, runcSnapshotter, err)
	}
	return img, nil
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// removeCgroups removes the folder parent, and whatever groups are left under it, from every
// cgroup hierarchy: runc removes a container's group on delete but not the parent it made.
func removeCgroups(b *testing.B, parent string) {
	hierarchies, _ := os.ReadDir(cgroupRoot)
	for _, h := range hierarchies {
		top := filepath.Join(cgroupRoot, h.Name(), parent)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first: a cgroup folder can only be removed once it has no children.
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				b.Errorf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

// runcShim returns the containerd-shim-runc-v2 to use: $RUNHCS_BENCH_RUNC_SHIM, else the one on
// PATH.
func runcShim() (string, error) {
	if p := os.Getenv(envRuncShim); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", envRuncShim, p, err)
		}
		return filepath.Abs(p)
	}
	p, err := exec.LookPath(runcShimBinary)
	if err != nil {
		return "", fmt.Errorf("%s not found (%w): set %s or run hack/bench-shim.sh, which builds it", runcShimBinary, err, envRuncShim)
	}
	return filepath.Abs(p)
}

// runcVersion is the first line of `runc --version`, for the table's header.
func runcVersion() string {
	out, err := exec.Command("runc", "--version").Output()
	if err != nil {
		return "runc version unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// shimRSS returns the VmRSS (KiB) of the serving shim (of executable binary) of container id.
func shimRSS(env *harness.Env, binary, id string) (int64, error) {
	pids := env.ServingShims(binary, id)
	if len(pids) != 1 {
		return 0, fmt.Errorf("shim %s of container %s: found %d serving processes (%v), want 1", binary, id, len(pids), pids)
	}
	return vmRSS(pids[0])
}

// vmRSS reads VmRSS (in KiB, as the kernel prints it) from /proc/<pid>/status.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("pid %d: VmRSS line %q: want \"<n> kB\"", pid, strings.TrimSpace(line))
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("pid " + strconv.Itoa(pid) + ": no VmRSS in /proc/<pid>/status")
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mibOf(kib int64) float64      { return float64(kib) / 1024 }
