package shim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// fakeJobs plays the host's HostProcess services: jobs (whose processes are fakeProcesses),
// bindings, accounts and tokens, recording what exists.
type fakeJobs struct {
	mu       sync.Mutex
	jobs     map[string]*fakeJob
	bindings map[string]string // path → target
	readOnly map[string]bool
	accounts map[string]string // account → group
	tokens   int               // open tokens
	groups   map[string]bool   // the host's local groups
	bindErr  error
}

func newFakeJobs() *fakeJobs {
	return &fakeJobs{jobs: map[string]*fakeJob{}, bindings: map[string]string{}, readOnly: map[string]bool{},
		accounts: map[string]string{}, groups: map[string]bool{"hpc-users": true}}
}

func (f *fakeJobs) CreateJob(_ context.Context, id string, l hostprocess.Limits) (hostprocess.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; ok {
		return nil, errors.New("fake: job exists")
	}
	j := &fakeJob{f: f, id: id, limits: l}
	f.jobs[id] = j
	return j, nil
}

func (f *fakeJobs) TerminateJob(ctx context.Context, id string) error {
	f.mu.Lock()
	j := f.jobs[id]
	f.mu.Unlock()
	if j == nil {
		return nil
	}
	return j.Terminate(ctx)
}

type fakeToken struct {
	f    *fakeJobs
	user string
}

func (t *fakeToken) Close() error { t.f.mu.Lock(); t.f.tokens--; t.f.mu.Unlock(); return nil }

func (f *fakeJobs) Logon(_ context.Context, user, account string, inherit bool) (hostprocess.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if inherit {
		user = "shim"
	} else if f.groups[user] {
		f.accounts[account] = user
		user = account
	}
	f.tokens++
	return &fakeToken{f: f, user: user}, nil
}

func (f *fakeJobs) DeleteAccount(_ context.Context, account string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.accounts, account)
	return nil
}

func (f *fakeJobs) Bind(_ context.Context, path, target string, ro bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bindErr != nil {
		return f.bindErr
	}
	f.bindings[path], f.readOnly[path] = target, ro
	return nil
}

func (f *fakeJobs) Unbind(_ context.Context, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bindings, path)
	delete(f.readOnly, path)
	return nil
}

// left reports what still exists on the fake host.
func (f *fakeJobs) left() (jobs, bindings, accounts, tokens int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if !j.closed {
			jobs++
		}
	}
	return jobs, len(f.bindings), len(f.accounts), f.tokens
}

type fakeJob struct {
	f      *fakeJobs
	id     string
	mu     sync.Mutex
	limits hostprocess.Limits
	procs  []*fakeProcess
	specs  []*hostprocess.ProcessSpec
	closed bool
}

func (j *fakeJob) Start(_ context.Context, p *hostprocess.ProcessSpec) (hostprocess.Process, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fp := newFakeProcess(uint32(1000+len(j.procs)), &schema2.ProcessParameters{CreateStdInPipe: p.Stdin, CreateStdOutPipe: p.Stdout, CreateStdErrPipe: p.Stderr})
	j.procs, j.specs = append(j.procs, fp), append(j.specs, p)
	return fp, nil
}

func (j *fakeJob) SetLimits(_ context.Context, l hostprocess.Limits) error {
	j.mu.Lock()
	j.limits = l
	j.mu.Unlock()
	return nil
}

func (j *fakeJob) Stats(context.Context) (*schema2.Statistics, error) {
	return &schema2.Statistics{Processor: &schema2.ProcessorStats{TotalRuntime100ns: 30, RuntimeUser100ns: 20, RuntimeKernel100ns: 10},
		Memory: &schema2.MemoryStats{MemoryUsageCommitBytes: 4096}}, nil
}

func (j *fakeJob) Pids(context.Context) ([]uint32, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []uint32
	for _, p := range j.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, p.pid)
		}
	}
	return out, nil
}

func (j *fakeJob) Terminate(context.Context) error {
	j.mu.Lock()
	procs := slices.Clone(j.procs)
	j.mu.Unlock()
	for _, p := range procs {
		p.exit(1)
	}
	return nil
}

func (j *fakeJob) Close() error {
	j.mu.Lock()
	j.closed = true
	procs := slices.Clone(j.procs)
	j.mu.Unlock()
	for _, p := range procs { // KILL_ON_JOB_CLOSE
		p.exit(1)
	}
	return nil
}

func (j *fakeJob) process(i int) *fakeProcess {
	j.mu.Lock()
	defer j.mu.Unlock()
	if i >= len(j.procs) {
		return nil
	}
	return j.procs[i]
}

func (f *fakeJobs) job(id string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

func hostProcessHarness(t *testing.T) (*harness, *fakeJobs) {
	h := newHarness(t)
	jobs := newFakeJobs()
	h.svc.deps.HostProcess = func() (hostprocess.Host, error) { return jobs, nil }
	return h, jobs
}

func hpcSpec(user string) *specs.Spec {
	s := testSpec()
	s.Linux = nil
	s.Process.Args = []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\agent.exe`, "--serve"}
	s.Process.Cwd = `C:\hpc`
	s.Process.Env = []string{`CONF=$env:CONTAINER_SANDBOX_MOUNT_POINT\conf`}
	s.Process.User.Username = user
	s.Annotations = map[string]string{oci.AnnotationHostProcess: "true"}
	return s
}

// TestHostProcessLifecycle: a HostProcess container is a job with the image's files bound at
// C:\hpc\<id>\ and its mounts below; its process sees the mount point expanded, its stats,
// pids and updates are the job's, and delete leaves no job, binding, account or token.
func TestHostProcessLifecycle(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	ctx := context.Background()
	s := hpcSpec("hpc-users")
	s.Mounts = []specs.Mount{{Source: `C:\var\log`, Destination: `C:\logs`, Options: []string{"ro"}}}
	mem := uint64(256 << 20)
	s.Windows.Resources = &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &mem}}
	req := h.bundle("hpc1", s)
	if _, err := h.svc.Create(ctx, req); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if h.host.system("hpc1") != nil {
		t.Fatal("a HostProcess container made a compute system")
	}
	wantRoot := `C:\hpc\hpc1\`
	if got, want := jobs.bindings[wantRoot], req.Rootfs[0].Source+"/mount"; got != want { // fakeLayers' volume
		t.Errorf("binding at %s = %q, want the mounted layers' volume %q", wantRoot, got, want)
	}
	if jobs.bindings[wantRoot+`logs`] != `C:\var\log` || !jobs.readOnly[wantRoot+`logs`] {
		t.Errorf("mount binding: %v ro %v", jobs.bindings, jobs.readOnly)
	}
	if jobs.accounts["hpc1"] != "hpc-users" {
		t.Errorf("temporary account for the group: %v", jobs.accounts)
	}
	j := jobs.job("hpc1")
	if j.limits.MemoryBytes != mem {
		t.Errorf("job memory limit %d, want %d", j.limits.MemoryBytes, mem)
	}

	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "hpc1"}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ps := j.specs[0]
	if ps.CommandLine != `C:\hpc\hpc1\agent.exe --serve` || ps.Dir != wantRoot || ps.Token.(*fakeToken).user != "hpc1" {
		t.Errorf("process spec: %+v", ps)
	}
	if !slices.Contains(ps.Env, `CONF=C:\hpc\hpc1\conf`) || !slices.Contains(ps.Env, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\hpc1\`) {
		t.Errorf("environment: %v", ps.Env)
	}

	// Exec, stats, pids, update.
	if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "hpc1", ExecID: "e1", Spec: anyOf(t, &specs.Process{Args: []string{"cmd.exe", "/c", "ver"}, Cwd: `C:\`})}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "hpc1", ExecID: "e1"}); err != nil {
		t.Fatalf("Start exec: %v", err)
	}
	if d := j.specs[1].Dir; d != `C:\` {
		t.Errorf("exec working dir %q, want the host's C:\\", d)
	}
	pids, err := h.svc.Pids(ctx, &taskapi.PidsRequest{ID: "hpc1"})
	if err != nil || len(pids.Processes) != 2 {
		t.Errorf("Pids = %v, %v", pids, err)
	}
	st, err := h.svc.Stats(ctx, &taskapi.StatsRequest{ID: "hpc1"})
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	v, err := typeurl.UnmarshalAny(st.Stats)
	if err != nil {
		t.Fatal(err)
	}
	if w := v.(*stats.Statistics).GetWindows(); w.GetProcessor().GetTotalRuntimeNs() != 3000 || w.GetMemory().GetMemoryUsageCommitBytes() != 4096 {
		t.Errorf("stats: %+v", w)
	}
	count := uint64(2)
	if _, err := h.svc.Update(ctx, &taskapi.UpdateTaskRequest{ID: "hpc1", Resources: anyOf(t, &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: &count}})}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if j.limits.CPUCount != 2 || j.limits.MemoryBytes != mem {
		t.Errorf("limits after update: %+v", j.limits)
	}
	if _, err := h.svc.Pause(ctx, &taskapi.PauseRequest{ID: "hpc1"}); !errdefs.IsNotImplemented(err) {
		t.Errorf("Pause: %v, want not implemented", err)
	}

	// SIGTERM is a console control event; SIGKILL ends the process; the init's exit ends
	// the job, the exec with it.
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "hpc1", Signal: 15}); err != nil {
		t.Fatalf("Kill 15: %v", err)
	}
	if sig := j.process(0).signals; len(sig) != 1 || sig[0] != schema2.SignalCtrlShutdown {
		t.Errorf("signals: %v", sig)
	}
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "hpc1", Signal: 9}); err != nil {
		t.Fatalf("Kill 9: %v", err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "hpc1"}); err != nil {
		t.Fatal(err)
	}
	<-j.process(1).exited
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "hpc1", ExecID: "e1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "hpc1"}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if nj, nb, na, nt := jobs.left(); nj+nb+na+nt != 0 || h.layers.count() != 0 {
		t.Errorf("left after delete: jobs %d, bindings %d, accounts %d, tokens %d, mounts %d", nj, nb, na, nt, h.layers.count())
	}
	if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("state left in the bundle")
	}
}

// TestHostProcessDeleteAction: after the shim died, the delete action ends the job by name
// and removes the bindings, the temporary account, the mount and the state, twice over.
func TestHostProcessDeleteAction(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	ctx := context.Background()
	s := hpcSpec("hpc-users")
	s.Mounts = []specs.Mount{{Source: `C:\data`, Destination: `C:\data`}}
	req := h.bundle("hpc2", s)
	if _, err := h.svc.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "hpc2"}); err != nil {
		t.Fatal(err)
	}
	p := jobs.job("hpc2").process(0)
	deps := task.Deps{Host: h.host, Mounter: h.layers, HostProcess: h.svc.deps.HostProcess}
	for i, wantPid := range []uint32{p.pid, 0} {
		pid, err := task.Cleanup(ctx, deps, "hpc2", req.Bundle)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if pid != wantPid {
			t.Errorf("run %d: pid %d, want %d", i, pid, wantPid)
		}
		if _, nb, na, _ := jobs.left(); nb+na != 0 || h.layers.count() != 0 {
			t.Fatalf("run %d left bindings %d, accounts %d, mounts %d", i, nb, na, h.layers.count())
		}
	}
	select {
	case <-p.exited:
	default:
		t.Error("the job's process still runs after the delete action")
	}
}

// TestHostProcessCreateFailureLeavesNothing: a binding that fails undoes the job, the earlier
// bindings and the mount.
func TestHostProcessCreateFailureLeavesNothing(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	jobs.bindErr = errors.New("fake: bind filter refused")
	if _, err := h.svc.Create(context.Background(), h.bundle("hpc3", hpcSpec(`NT AUTHORITY\SYSTEM`))); err == nil || !strings.Contains(err.Error(), "bind filter refused") {
		t.Fatalf("Create: %v", err)
	}
	if nj, nb, na, nt := jobs.left(); nj+nb+na+nt != 0 || h.layers.count() != 0 {
		t.Errorf("left: jobs %d, bindings %d, accounts %d, tokens %d, mounts %d", nj, nb, na, nt, h.layers.count())
	}
}

// TestHostProcessRefusals: each refusal names its field and changes nothing.
func TestHostProcessRefusals(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	ctx := context.Background()
	// A normal pod sandbox, and a HostProcess pod sandbox.
	normal := testSpec()
	normal.Annotations = map[string]string{oci.AnnotationContainerType: "sandbox", oci.AnnotationSandboxID: "pod", oci.AnnotationHostProcess: "false"}
	if _, err := h.svc.Create(ctx, h.bundle("pod", normal)); err != nil {
		t.Fatal(err)
	}
	hpcPod := hpcSpec(`NT AUTHORITY\SYSTEM`)
	hpcPod.Annotations[oci.AnnotationContainerType], hpcPod.Annotations[oci.AnnotationSandboxID] = "sandbox", "hpod"
	if _, err := h.svc.Create(ctx, h.bundle("hpod", hpcPod)); err != nil {
		t.Fatal(err)
	}

	inPod := func(s *specs.Spec, pod string) *specs.Spec {
		s.Annotations[oci.AnnotationContainerType], s.Annotations[oci.AnnotationSandboxID] = "container", pod
		return s
	}
	plain := testSpec()
	plain.Annotations = map[string]string{oci.AnnotationHostProcess: "false"}
	cases := []struct {
		name string
		spec *specs.Spec
		opts *options.Options
		want []string
		kind func(error) bool
	}{
		{"HostProcess container in a normal pod", inPod(hpcSpec(`NT AUTHORITY\SYSTEM`), "pod"), nil,
			[]string{oci.AnnotationHostProcess, "pod pod is not a HostProcess pod"}, errdefs.IsFailedPrecondition},
		{"normal container in a HostProcess pod", inPod(plain, "hpod"), nil,
			[]string{oci.AnnotationHostProcess, "hpod is a HostProcess pod"}, errdefs.IsFailedPrecondition},
		{"disabled", func() *specs.Spec {
			s := hpcSpec(`NT AUTHORITY\SYSTEM`)
			s.Annotations[oci.AnnotationDisableHostProcess] = "true"
			return s
		}(), nil, []string{oci.AnnotationDisableHostProcess}, errdefs.IsPermissionDenied},
		{"Hyper-V handler", hpcSpec(`NT AUTHORITY\SYSTEM`), &options.Options{SandboxIsolation: options.Options_HYPERVISOR},
			[]string{oci.AnnotationHostProcess, "sandbox_isolation=HYPERVISOR", "runhcs-wcow-process"}, errdefs.IsInvalidArgument},
		{"bad value", func() *specs.Spec { s := hpcSpec("x"); s.Annotations[oci.AnnotationHostProcess] = "yes"; return s }(), nil,
			[]string{oci.AnnotationHostProcess, `"yes"`}, errdefs.IsInvalidArgument},
		{"no user", hpcSpec(""), nil, []string{"process.user.username"}, errdefs.IsInvalidArgument},
		{"network namespace", func() *specs.Spec {
			s := hpcSpec(`NT AUTHORITY\SYSTEM`)
			s.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: "ns1"}
			return s
		}(), nil, []string{"windows.network"}, errdefs.IsInvalidArgument},
		{"named pipe mount", func() *specs.Spec {
			s := hpcSpec(`NT AUTHORITY\SYSTEM`)
			s.Mounts = []specs.Mount{{Source: `\\.\pipe\docker_engine`, Destination: `\\.\pipe\docker_engine`}}
			return s
		}(), nil, []string{"mounts[0].source"}, errdefs.IsInvalidArgument},
		{"bad rootfs location", func() *specs.Spec {
			s := hpcSpec(`NT AUTHORITY\SYSTEM`)
			s.Annotations[oci.AnnotationHostProcessRootfsLocation] = `relative\dir`
			return s
		}(), nil, []string{oci.AnnotationHostProcessRootfsLocation}, errdefs.IsInvalidArgument},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.layers.count()
			nj0, nb0, _, _ := jobs.left()
			req := h.bundle("bad"+string(rune('a'+i)), c.spec)
			if c.opts != nil {
				req.Options = mustAny(t, c.opts)
			}
			_, err := h.svc.Create(ctx, req)
			if err == nil || !c.kind(err) {
				t.Fatalf("Create: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if nj, nb, _, _ := jobs.left(); nj != nj0 || nb != nb0 || h.layers.count() != before {
				t.Error("a refused create changed something")
			}
		})
	}
}

// TestHostProcessPodAnnotations: a container of a HostProcess pod inherits the pod's
// inherit-user and rootfs-location annotations unless it sets its own.
func TestHostProcessPodAnnotations(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	ctx := context.Background()
	sb := hpcSpec(`NT AUTHORITY\SYSTEM`)
	sb.Annotations[oci.AnnotationContainerType], sb.Annotations[oci.AnnotationSandboxID] = "sandbox", "hpod"
	sb.Annotations[oci.AnnotationHostProcessRootfsLocation] = `D:\agents`
	sb.Annotations[oci.AnnotationHostProcessInheritUser] = "true"
	if _, err := h.svc.Create(ctx, h.bundle("hpod", sb)); err != nil {
		t.Fatal(err)
	}
	c := hpcSpec(`NT AUTHORITY\LOCAL SERVICE`)
	c.Annotations[oci.AnnotationContainerType], c.Annotations[oci.AnnotationSandboxID] = "container", "hpod"
	if _, err := h.svc.Create(ctx, h.bundle("c1", c)); err != nil {
		t.Fatal(err)
	}
	if _, ok := jobs.bindings[`D:\agents\c1\`]; !ok {
		t.Errorf("bindings %v: want the pod's rootfs location", jobs.bindings)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if u := jobs.job("c1").specs[0].Token.(*fakeToken).user; u != "shim" {
		t.Errorf("token of %q, want the shim's (inherited inherit-user)", u)
	}
	// Its own annotation wins.
	c2 := hpcSpec(`NT AUTHORITY\LOCAL SERVICE`)
	c2.Annotations[oci.AnnotationContainerType], c2.Annotations[oci.AnnotationSandboxID] = "container", "hpod"
	c2.Annotations[oci.AnnotationHostProcessInheritUser] = "false"
	if _, err := h.svc.Create(ctx, h.bundle("c2", c2)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "c2"}); err != nil {
		t.Fatal(err)
	}
	if u := jobs.job("c2").specs[0].Token.(*fakeToken).user; u != `NT AUTHORITY\LOCAL SERVICE` {
		t.Errorf("token of %q, want LOCAL SERVICE", u)
	}
}

// TestHostProcessSandbox: a HostProcess pod's sandbox runs nothing and holds nothing (hcsshim's
// wcowPodSandboxTask for a job-container pod): no job, binding, account, mount or compute
// system; pid 0; no exec, no update, empty statistics; a kill ends it with 0, and delete (or
// the delete action after a killed shim) leaves no state.
func TestHostProcessSandbox(t *testing.T) {
	h, jobs := hostProcessHarness(t)
	ctx := context.Background()
	sb := hpcSpec("ContainerUser") // the pause image's user, which no host has
	sb.Process.Args = []string{`C:\pause.exe`}
	sb.Annotations[oci.AnnotationContainerType], sb.Annotations[oci.AnnotationSandboxID] = "sandbox", "hpod"
	req := h.bundle("hpod", sb)
	if _, err := h.svc.Create(ctx, req); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if nj, nb, na, nt := jobs.left(); nj+nb+na+nt != 0 || h.layers.count() != 0 || h.host.system("hpod") != nil {
		t.Fatalf("the sandbox holds jobs %d, bindings %d, accounts %d, tokens %d, mounts %d, system %v",
			nj, nb, na, nt, h.layers.count(), h.host.system("hpod") != nil)
	}
	start, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "hpod"})
	if err != nil || start.Pid != 0 {
		t.Fatalf("Start = %v, %v; want pid 0", start, err)
	}
	if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "hpod", ExecID: "e1", Spec: anyOf(t, &specs.Process{Args: []string{"cmd.exe"}, Cwd: `C:\`})}); !errdefs.IsNotImplemented(err) {
		t.Errorf("Exec: %v, want not implemented", err)
	}
	mem := uint64(64 << 20)
	if _, err := h.svc.Update(ctx, &taskapi.UpdateTaskRequest{ID: "hpod", Resources: anyOf(t, &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &mem}})}); !errdefs.IsNotImplemented(err) {
		t.Errorf("Update: %v, want not implemented", err)
	}
	st, err := h.svc.Stats(ctx, &taskapi.StatsRequest{ID: "hpod"})
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if v, err := typeurl.UnmarshalAny(st.Stats); err != nil || v.(*stats.Statistics).GetWindows() != nil || v.(*stats.Statistics).GetVm() != nil {
		t.Errorf("Stats = %v, %v; want empty", v, err)
	}
	if pids, err := h.svc.Pids(ctx, &taskapi.PidsRequest{ID: "hpod"}); err != nil || len(pids.Processes) != 1 || pids.Processes[0].Pid != 0 {
		t.Errorf("Pids = %v, %v; want pid 0 only", pids, err)
	}
	// Its container joins it; a process-isolated container may not.
	c := hpcSpec(`NT AUTHORITY\SYSTEM`)
	c.Annotations[oci.AnnotationContainerType], c.Annotations[oci.AnnotationSandboxID] = "container", "hpod"
	if _, err := h.svc.Create(ctx, h.bundle("c1", c)); err != nil {
		t.Fatalf("Create a container of the pod: %v", err)
	}
	plain := testSpec()
	plain.Annotations = map[string]string{oci.AnnotationContainerType: "container", oci.AnnotationSandboxID: "hpod"}
	if _, err := h.svc.Create(ctx, h.bundle("c2", plain)); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("a process-isolated container in the HostProcess pod: %v, want failed precondition", err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}

	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "hpod", Signal: 15}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	w, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "hpod"})
	if err != nil || w.ExitStatus != 0 {
		t.Fatalf("Wait = %v, %v; want exit 0", w, err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "hpod"}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("state left in the bundle")
	}

	// A second sandbox, left by a killed shim: the delete action removes its state.
	sb.Annotations[oci.AnnotationSandboxID] = "hpod2"
	req2 := h.bundle("hpod2", sb)
	if _, err := h.svc.Create(ctx, req2); err != nil {
		t.Fatal(err)
	}
	deps := task.Deps{Host: h.host, Mounter: h.layers, HostProcess: h.svc.deps.HostProcess}
	if pid, err := task.Cleanup(ctx, deps, "hpod2", req2.Bundle); err != nil || pid != 0 {
		t.Errorf("delete action: pid %d, %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(req2.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("the delete action left the state in the bundle")
	}
}
