package shim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/shim/task"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

type harness struct {
	t      *testing.T
	svc    *service
	host   *fakeHost
	layers *fakeLayers
	pub    *fakePublisher
	dir    string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), "test"))
	t.Cleanup(cancel)
	h := &harness{t: t, host: newFakeHost(), layers: newFakeLayers(), pub: newFakePublisher(), dir: t.TempDir()}
	h.svc = newService(ctx, h.host, h.layers, h.pub, nil)
	// Registered after t.TempDir, so it runs before the folder is removed.
	t.Cleanup(h.endTasks)
	return h
}

// endTasks ends what a test left running as containerd would (kill --all, then wait for every
// process), so that the relays close the log files in h.dir before t.TempDir removes it
// (Windows cannot remove an open file) and no relay outlives its test.
func (h *harness) endTasks() {
	tasks := h.svc.pod.Tasks()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tk := range tasks {
		// Errors are expected here: a process that already exited cannot be killed.
		_, _ = h.svc.Kill(ctx, &taskapi.KillRequest{ID: tk.ID(), Signal: 9, All: true})
		init, err := tk.Process("")
		if err != nil {
			h.t.Fatal(err)
		}
		for _, p := range append(tk.Execs(), init) {
			if _, err := p.Wait(ctx); err != nil {
				h.t.Errorf("process %s of task %s did not end after kill --all: %v", p.ID(), tk.ID(), err)
			}
		}
	}
}

func testSpec() *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{Args: []string{`C:\workload\workload.exe`, "echo", "hi"}, Cwd: `C:\`},
		Windows: &specs.Windows{},
		// ctr on a Linux host adds this beside windows; it must be ignored.
		Linux: &specs.Linux{},
	}
}

// bundle writes a bundle for id and returns the create request for it, with stdout and
// stderr going to files.
func (h *harness) bundle(id string, spec *specs.Spec) *taskapi.CreateTaskRequest {
	h.t.Helper()
	b := filepath.Join(h.dir, id)
	if err := os.MkdirAll(b, 0o755); err != nil {
		h.t.Fatal(err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "config.json"), data, 0o644); err != nil {
		h.t.Fatal(err)
	}
	return &taskapi.CreateTaskRequest{
		ID:     id,
		Bundle: b,
		Rootfs: []*types.Mount{{
			Type:    "windows-layer",
			Source:  filepath.Join(h.dir, "scratch-"+id),
			Options: []string{"rw", `parentLayerPaths=["/layers/2","/layers/1"]`},
		}},
		Stdout: logFileURI(h.t, filepath.Join(b, "out.log")),
	}
}

// logFileURI is what containerd's clients send for a log file at path (pkg/cio.LogFile):
// file:///var/log/c1.log on Linux, file:///C:/dir/c1.log on Windows.
func logFileURI(t *testing.T, path string) string {
	t.Helper()
	u, err := cio.LogURIGenerator("file", path, nil)
	if err != nil {
		t.Fatalf("log URI of %s: %v", path, err)
	}
	return u.String()
}

func (h *harness) waitEvents(n int) []publishedEvent {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if ev := h.pub.all(); len(ev) >= n {
			return ev
		}
		select {
		case <-h.pub.notify:
		case <-deadline:
			h.t.Fatalf("timed out waiting for %d events; got %v", n, h.pub.topics())
		}
	}
}

func (h *harness) createStart(req *taskapi.CreateTaskRequest) *fakeProcess {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.svc.Create(ctx, req); err != nil {
		h.t.Fatalf("Create: %v", err)
	}
	if _, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: req.ID}); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	return h.host.system(req.ID).process(0)
}

func count(topics []string, topic string) int {
	n := 0
	for _, t := range topics {
		if t == topic {
			n++
		}
	}
	return n
}

// TestRunToCompletion: output written right before a fast exit is delivered, the exit
// is published once, after the start, and Delete leaves nothing behind.
func TestRunToCompletion(t *testing.T) {
	h := newHarness(t)
	req := h.bundle("c1", testSpec())
	p := h.createStart(req)

	big := strings.Repeat("0123456789abcdef", 64<<10/16) // 64 KiB, more than a pipe buffer
	go func() {
		_, _ = p.stdoutW.Write([]byte(big))
		p.exit(3)
	}()
	resp, err := h.svc.Wait(context.Background(), &taskapi.WaitRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitStatus != 3 {
		t.Errorf("exit status %d, want 3", resp.ExitStatus)
	}
	out, err := os.ReadFile(filepath.Join(req.Bundle, "out.log"))
	if err != nil || string(out) != big {
		t.Errorf("output: %d bytes (err %v), want %d", len(out), err, len(big))
	}
	ev := h.waitEvents(3)
	topics := h.pub.topics()
	if want := []string{runtime.TaskCreateEventTopic, runtime.TaskStartEventTopic, runtime.TaskExitEventTopic}; !slices.Equal(topics[:3], want) {
		t.Errorf("events %v, want %v", topics, want)
	}
	exit := ev[2].event.(*eventstypes.TaskExit)
	if exit.ContainerID != "c1" || exit.ID != "c1" || exit.Pid != p.pid || exit.ExitStatus != 3 || exit.ExitedAt == nil {
		t.Errorf("TaskExit %+v", exit)
	}
	st, err := h.svc.State(context.Background(), &taskapi.StateRequest{ID: "c1"})
	if err != nil || st.Status != tasktypes.Status_STOPPED || st.ExitStatus != 3 {
		t.Errorf("State = %+v, %v", st, err)
	}

	del, err := h.svc.Delete(context.Background(), &taskapi.DeleteRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if del.ExitStatus != 3 || del.Pid != p.pid {
		t.Errorf("Delete = %+v", del)
	}
	if h.host.system("c1") != nil {
		t.Error("compute system left behind")
	}
	if h.layers.count() != 0 {
		t.Error("layers left mounted")
	}
	if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left behind: %v", err)
	}
	h.waitEvents(4)
	topics = h.pub.topics()
	if count(topics, runtime.TaskExitEventTopic) != 1 || count(topics, runtime.TaskDeleteEventTopic) != 1 {
		t.Errorf("events %v: want one exit and one delete", topics)
	}
	if _, err := h.svc.State(context.Background(), &taskapi.StateRequest{ID: "c1"}); !errdefs.IsNotFound(err) {
		t.Errorf("State after delete: %v, want NotFound", err)
	}
}

func TestCreateDocument(t *testing.T) {
	h := newHarness(t)
	spec := testSpec()
	spec.Hostname = "box"
	req := h.bundle("c1", spec)
	if _, err := h.svc.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
	if doc.Container.Storage.Path != req.Rootfs[0].Source+"/mount" {
		t.Errorf("storage path %q", doc.Container.Storage.Path)
	}
	if len(doc.Container.Storage.Layers) != 2 || doc.Container.Storage.Layers[0].Path != "/layers/2" {
		t.Errorf("layers %+v", doc.Container.Storage.Layers)
	}
	if doc.Container.GuestOs.HostName != "box" {
		t.Errorf("hostname %+v", doc.Container.GuestOs)
	}
}

// TestCreateFailureLeavesNothing: an HCS refusal surfaces with the system id, and the
// mount and the state are undone.
func TestCreateFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*harness)
	}{
		{"create refused", func(h *harness) { h.host.createErr = errors.New("HCS_E_INVALID_JSON: Container.Processor.Count") }},
		{"start refused", func(h *harness) { h.host.startErr = errors.New("HCS_E_OPERATION_START_FAILED") }},
		// The undo falls back to opening the system by its id (found by the soak suite: it
		// opened the system "" and left the real one behind).
		{"start refused, terminate through the handle fails", func(h *harness) {
			h.host.startErr = errors.New("HCS_E_OPERATION_START_FAILED")
			h.host.staleCreated = true
		}},
		{"mount refused", func(h *harness) { h.layers.mountErr = errors.New("overlay: no such parent") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.setup(h)
			req := h.bundle("c1", testSpec())
			_, err := h.svc.Create(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "c1") {
				t.Fatalf("err = %v, want an error naming the system", err)
			}
			if h.layers.count() != 0 {
				t.Error("layers left mounted")
			}
			if h.host.system("c1") != nil {
				t.Error("compute system left behind")
			}
			if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state left behind: %v", err)
			}
			if len(h.pub.topics()) != 0 {
				t.Errorf("events %v published for a failed create", h.pub.topics())
			}
		})
	}
}

func TestCreateBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*specs.Spec, *taskapi.CreateTaskRequest)
		want   string
	}{
		{"no windows", func(s *specs.Spec, _ *taskapi.CreateTaskRequest) { s.Windows = nil }, "spec has no windows section"},
		{"cpu count", func(s *specs.Spec, _ *taskapi.CreateTaskRequest) {
			zero := uint64(0)
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: &zero}}
		}, "windows.resources.cpu.count"},
		{"no rootfs", func(_ *specs.Spec, r *taskapi.CreateTaskRequest) { r.Rootfs = nil }, "no rootfs"},
		{"mount type", func(_ *specs.Spec, r *taskapi.CreateTaskRequest) { r.Rootfs[0].Type = "overlay" }, `"overlay"`},
		{"parents", func(_ *specs.Spec, r *taskapi.CreateTaskRequest) {
			r.Rootfs[0].Options = []string{"parentLayerPaths=notjson"}
		}, "parentLayerPaths"},
		{"options", func(_ *specs.Spec, r *taskapi.CreateTaskRequest) {
			a, _ := typeurl.MarshalAnyToProto(&options.Options{LogLevel: "loud"})
			r.Options = a
		}, `log_level="loud"`},
		{"hyperv", func(_ *specs.Spec, r *taskapi.CreateTaskRequest) {
			a, _ := typeurl.MarshalAnyToProto(&options.Options{SandboxIsolation: options.Options_HYPERVISOR})
			r.Options = a
		}, "Hyper-V"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			spec := testSpec()
			req := h.bundle("c1", spec)
			tc.mutate(spec, req)
			data, _ := json.Marshal(spec)
			_ = os.WriteFile(filepath.Join(req.Bundle, "config.json"), data, 0o644)
			_, err := h.svc.Create(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
			if h.layers.count() != 0 || h.host.system("c1") != nil {
				t.Error("bad input changed something")
			}
		})
	}
}

func TestCreateFromLayerFolders(t *testing.T) {
	h := newHarness(t)
	spec := testSpec()
	// Runtime spec order: topmost layer first, base, then the scratch.
	spec.Windows.LayerFolders = []string{"/layers/2", "/layers/1", filepath.Join(h.dir, "scratch")}
	req := h.bundle("c1", spec)
	req.Rootfs = nil
	if _, err := h.svc.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	doc := h.host.system("c1").doc.(*schema2.ComputeSystem)
	if got := doc.Container.Storage.Layers; len(got) != 2 || got[0].Path != "/layers/2" || got[1].Path != "/layers/1" {
		t.Errorf("layers %+v, want nearest first", got)
	}
}

func TestKillSignals(t *testing.T) {
	h := newHarness(t)
	p := h.createStart(h.bundle("c1", testSpec()))
	ctx := context.Background()
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 15}); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 10})
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "signal 10") {
		t.Errorf("SIGUSR1: %v, want InvalidArgument naming it", err)
	}
	p.mu.Lock()
	sigs := slices.Clone(p.signals)
	p.mu.Unlock()
	if want := []schema2.ProcessSignal{schema2.SignalCtrlC, schema2.SignalCtrlShutdown}; !slices.Equal(sigs, want) {
		t.Errorf("signals %v, want %v", sigs, want)
	}
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 9}); !errdefs.IsNotFound(err) {
		t.Errorf("kill after exit: %v, want NotFound", err)
	}
}

// TestExecAndKillAll: an exec runs in the same system; kill --all ends the exec then the
// init; each exit is published once, the exec's before the init's.
func TestExecAndKillAll(t *testing.T) {
	h := newHarness(t)
	h.createStart(h.bundle("c1", testSpec()))
	ctx := context.Background()
	spec, err := typeurl.MarshalAnyToProto(&specs.Process{Args: []string{"cmd", "/c", "dir"}, Cwd: `C:\`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "c1", ExecID: "e1", Spec: spec, Stdout: logFileURI(t, filepath.Join(h.dir, "e1.log"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Exec(ctx, &taskapi.ExecProcessRequest{ID: "c1", ExecID: "e1", Spec: spec}); !errdefs.IsAlreadyExists(err) {
		t.Errorf("duplicate exec: %v", err)
	}
	st, err := h.svc.Start(ctx, &taskapi.StartRequest{ID: "c1", ExecID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	pids, err := h.svc.Pids(ctx, &taskapi.PidsRequest{ID: "c1"})
	if err != nil || len(pids.Processes) != 2 {
		t.Fatalf("Pids = %v, %v", pids, err)
	}
	for _, pi := range pids.Processes {
		v, err := typeurl.UnmarshalAny(pi.Info)
		if err != nil {
			t.Fatal(err)
		}
		d := v.(*options.ProcessDetails)
		if pi.Pid == st.Pid && d.ExecId != "e1" {
			t.Errorf("details of exec pid %d: %+v", pi.Pid, d)
		}
	}
	if _, err := h.svc.Kill(ctx, &taskapi.KillRequest{ID: "c1", Signal: 9, All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(6)
	topics := h.pub.topics()
	want := []string{runtime.TaskCreateEventTopic, runtime.TaskStartEventTopic, runtime.TaskExecAddedEventTopic,
		runtime.TaskExecStartedEventTopic, runtime.TaskExitEventTopic, runtime.TaskExitEventTopic}
	if !slices.Equal(topics, want) {
		t.Fatalf("events %v, want %v", topics, want)
	}
	ev := h.pub.all()
	if id := ev[4].event.(*eventstypes.TaskExit).ID; id != "e1" {
		t.Errorf("first exit is %q, want the exec's", id)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1", ExecID: "e1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Delete(ctx, &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
}

func TestPauseResumeUpdateStats(t *testing.T) {
	h := newHarness(t)
	h.createStart(h.bundle("c1", testSpec()))
	ctx := context.Background()
	if _, err := h.svc.Resume(ctx, &taskapi.ResumeRequest{ID: "c1"}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("resume running: %v", err)
	}
	if _, err := h.svc.Pause(ctx, &taskapi.PauseRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.svc.State(ctx, &taskapi.StateRequest{ID: "c1"}); st.Status != tasktypes.Status_PAUSED {
		t.Errorf("status %v after pause", st.Status)
	}
	if _, err := h.svc.Resume(ctx, &taskapi.ResumeRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(4)
	if topics := h.pub.topics(); topics[2] != runtime.TaskPausedEventTopic || topics[3] != runtime.TaskResumedEventTopic {
		t.Errorf("events %v", topics)
	}

	maximum := uint16(5000)
	res, _ := typeurl.MarshalAnyToProto(&specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: &maximum}})
	if _, err := h.svc.Update(ctx, &taskapi.UpdateTaskRequest{ID: "c1", Resources: res}); err != nil {
		t.Fatal(err)
	}
	sys := h.host.system("c1")
	if len(sys.modified) != 1 || sys.modified[0].ResourcePath != schema2.ResourcePathContainerProcessor {
		t.Errorf("modify requests %+v", sys.modified)
	}

	sr, err := h.svc.Stats(ctx, &taskapi.StatsRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if sr.Stats.GetTypeUrl() != "containerd.runhcs.stats.v1.Statistics" {
		t.Errorf("stats type %q", sr.Stats.GetTypeUrl())
	}
	v, err := typeurl.UnmarshalAny(sr.Stats)
	if err != nil {
		t.Fatal(err)
	}
	w := v.(*stats.Statistics).GetWindows()
	if w.GetProcessor().GetTotalRuntimeNs() != 700 || w.GetUptimeNs() != 1000 || w.GetMemory().GetMemoryUsageCommitBytes() != 4096 {
		t.Errorf("stats %+v", w)
	}
	if _, err := h.svc.Checkpoint(ctx, &taskapi.CheckpointTaskRequest{ID: "c1"}); !errdefs.IsNotImplemented(err) {
		t.Errorf("checkpoint: %v", err)
	}
}

// TestStuckHCS: State, Pids and Connect answer within a second while HCS does not.
func TestStuckHCS(t *testing.T) {
	h := newHarness(t)
	p := h.createStart(h.bundle("c1", testSpec()))
	sys := h.host.system("c1")
	sys.mu.Lock()
	sys.stuck = true
	sys.mu.Unlock()
	ctx := context.Background()
	start := time.Now()
	if _, err := h.svc.State(ctx, &taskapi.StateRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	pids, err := h.svc.Pids(ctx, &taskapi.PidsRequest{ID: "c1"})
	if err != nil || len(pids.Processes) != 1 || pids.Processes[0].Pid != p.pid {
		t.Errorf("Pids = %v, %v", pids, err)
	}
	c, err := h.svc.Connect(ctx, &taskapi.ConnectRequest{ID: "c1"})
	if err != nil || c.TaskPid != p.pid {
		t.Errorf("Connect = %v, %v", c, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("answers took %v", d)
	}
}

// TestKillCreated: a task killed before start ends with one exit and can be deleted.
func TestKillCreated(t *testing.T) {
	h := newHarness(t)
	if _, err := h.svc.Create(context.Background(), h.bundle("c1", testSpec())); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Kill(context.Background(), &taskapi.KillRequest{ID: "c1", Signal: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Start(context.Background(), &taskapi.StartRequest{ID: "c1"}); err == nil {
		t.Error("started a killed task")
	}
	if _, err := h.svc.Delete(context.Background(), &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	h.waitEvents(3)
	if n := count(h.pub.topics(), runtime.TaskExitEventTopic); n != 1 {
		t.Errorf("%d exits", n)
	}
}

// TestSystemGone: when the compute system (or HCS) goes away, the running task is reported
// as exited.
func TestSystemGone(t *testing.T) {
	h := newHarness(t)
	h.svc.deps.ExitGrace = 50 * time.Millisecond // before any task is created
	h.createStart(h.bundle("c1", testSpec()))
	sys := h.host.system("c1")
	sys.exitOnce.Do(func() { close(sys.exited) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
}

// TestSystemExitBeforeProcessExit: HCS may report the system's exit before its init
// process's; the process's own exit code is still the one reported.
func TestSystemExitBeforeProcessExit(t *testing.T) {
	h := newHarness(t)
	p := h.createStart(h.bundle("c1", testSpec()))
	sys := h.host.system("c1")
	sys.exitOnce.Do(func() { close(sys.exited) })
	time.Sleep(50 * time.Millisecond)
	p.exit(3)
	resp, err := h.svc.Wait(context.Background(), &taskapi.WaitRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitStatus != 3 {
		t.Errorf("exit status %d, want the process's 3", resp.ExitStatus)
	}
}

func TestDeleteRunningRefused(t *testing.T) {
	h := newHarness(t)
	h.createStart(h.bundle("c1", testSpec()))
	if _, err := h.svc.Delete(context.Background(), &taskapi.DeleteRequest{ID: "c1"}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("delete running: %v", err)
	}
}

func TestShutdownKeepsPod(t *testing.T) {
	h := newHarness(t)
	sd := newFakeShutdown()
	h.svc.shutdown = sd
	if _, err := h.svc.Create(context.Background(), h.bundle("c1", testSpec())); err != nil {
		t.Fatal(err)
	}
	if sd.endsAfter(t, func(ctx context.Context) error {
		_, err := h.svc.Shutdown(ctx, &taskapi.ShutdownRequest{ID: "other"})
		return err
	}) {
		t.Error("shut down with a task left")
	}
	if _, err := h.svc.Delete(context.Background(), &taskapi.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if !sd.endsAfter(t, func(ctx context.Context) error {
		_, err := h.svc.Shutdown(ctx, &taskapi.ShutdownRequest{ID: "c1"})
		return err
	}) {
		t.Error("not shut down with no task left")
	}
}

// fakeShutdown records that the shim ended (shutdown.Service).
type fakeShutdown struct {
	once sync.Once
	done chan struct{}
}

func newFakeShutdown() *fakeShutdown { return &fakeShutdown{done: make(chan struct{})} }

func (f *fakeShutdown) Shutdown()                                    { f.once.Do(func() { close(f.done) }) }
func (f *fakeShutdown) RegisterCallback(func(context.Context) error) {}
func (f *fakeShutdown) Done() <-chan struct{}                        { return nil }
func (f *fakeShutdown) Err() error                                   { return nil }

// endsAfter calls rpc with a request context as ttrpc gives one, and says whether the shim ended
// because of it. The shim must not end while the RPC's reply is unsent: not before the context
// is done, which ttrpc does once the reply is queued.
func (f *fakeShutdown) endsAfter(t *testing.T, rpc func(context.Context) error) bool {
	t.Helper()
	ctx, replied := context.WithCancel(context.Background())
	defer replied()
	if err := rpc(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing can end the shim before ctx is done (exitIfIdle waits for it), so this is not
	// a race: a shutdown seen here happened inside the RPC.
	select {
	case <-f.done:
		t.Fatal("the shim ended before the RPC's reply was sent")
	default:
	}
	replied()
	// A shutdown is due replyWriteWait after the reply; a hundred times that is a generous
	// bound for "it did not come".
	select {
	case <-f.done:
		return true
	case <-time.After(100 * replyWriteWait):
		return false
	}
}

// TestV2 calls through the containerd.task.v2 adapter.
func TestV2(t *testing.T) {
	h := newHarness(t)
	v2 := serviceV2{h.svc}
	req := h.bundle("c1", testSpec())
	var r2 taskv2.CreateTaskRequest
	if err := convertMessage(req, &r2); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Create(context.Background(), &r2); err != nil {
		t.Fatal(err)
	}
	st, err := v2.State(context.Background(), &taskv2.StateRequest{ID: "c1"})
	if err != nil || st.ID != "c1" || st.Bundle != req.Bundle || st.Status != tasktypes.Status_CREATED {
		t.Errorf("v2 State = %+v, %v", st, err)
	}
	if _, err := v2.State(context.Background(), &taskv2.StateRequest{ID: "nope"}); !errdefs.IsNotFound(err) {
		t.Errorf("v2 State of unknown: %v", err)
	}
}

// TestDeleteAction: the delete action after a shim died removes the system, the mount and
// the state, reports the init process's pid, and can run again.
func TestDeleteAction(t *testing.T) {
	h := newHarness(t)
	req := h.bundle("c1", testSpec())
	initPid := h.createStart(req).pid
	ctx := context.Background()
	for i, wantPid := range []uint32{initPid, 0} { // the second run finds no state left
		pid, err := task.Cleanup(ctx, task.Deps{Host: h.host, Mounter: h.layers}, "c1", req.Bundle)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if pid != wantPid {
			t.Errorf("run %d reported pid %d, want %d", i, pid, wantPid)
		}
		if h.host.system("c1") != nil || h.layers.count() != 0 {
			t.Fatalf("run %d left the system or the mount", i)
		}
		if _, err := os.Stat(filepath.Join(req.Bundle, task.StateFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("run %d left the state", i)
		}
	}
}

func TestResizePty(t *testing.T) {
	h := newHarness(t)
	spec := testSpec()
	req := h.bundle("c1", spec)
	req.Terminal = true
	p := h.createStart(req)
	if !p.params.EmulateConsole || p.params.CreateStdErrPipe {
		t.Errorf("terminal process parameters %+v", p.params)
	}
	ctx := context.Background()
	if _, err := h.svc.ResizePty(ctx, &taskapi.ResizePtyRequest{ID: "c1", Width: 120, Height: 40}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	got := slices.Clone(p.resizes)
	p.mu.Unlock()
	if len(got) != 1 || got[0] != [2]uint16{120, 40} {
		t.Errorf("resizes %v", got)
	}
	p.exit(0)
	if _, err := h.svc.Wait(ctx, &taskapi.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	// Clients resize after exit too; that is not an error.
	if _, err := h.svc.ResizePty(ctx, &taskapi.ResizePtyRequest{ID: "c1", Width: 80, Height: 24}); err != nil {
		t.Errorf("resize after exit: %v", err)
	}
}

func TestResizeWithoutTerminal(t *testing.T) {
	h := newHarness(t)
	h.createStart(h.bundle("c1", testSpec()))
	if _, err := h.svc.ResizePty(context.Background(), &taskapi.ResizePtyRequest{ID: "c1", Width: 1, Height: 1}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("resize without a terminal: %v", err)
	}
}

// TestCloseIO: what the client wrote reaches the process, then its stdin closes.
func TestCloseIO(t *testing.T) {
	h := newHarness(t)
	req := h.bundle("c1", testSpec())
	req.Stdin = clientStdin(t, h.dir, "typed")
	p := h.createStart(req)
	if !p.params.CreateStdInPipe {
		t.Fatal("no stdin pipe asked for")
	}
	if _, err := h.svc.CloseIO(context.Background(), &taskapi.CloseIORequest{ID: "c1", Stdin: true}); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(p.stdinR)
	if err != nil || string(got) != "typed" {
		t.Errorf("process read %q, %v", got, err)
	}
}

// TestCreateNegativeCPUCount: a spec written by hand with a negative CPU count is refused
// with an error naming the field (the Go types cannot even hold it).
func TestCreateNegativeCPUCount(t *testing.T) {
	h := newHarness(t)
	req := h.bundle("c1", testSpec())
	raw := `{"ociVersion":"1.1.0","process":{"args":["a.exe"],"cwd":"C:\\"},"windows":{"resources":{"cpu":{"count":-1}}}}`
	if err := os.WriteFile(filepath.Join(req.Bundle, "config.json"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Create(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "windows.resources.cpu.count") || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want InvalidArgument naming windows.resources.cpu.count", err)
	}
	if h.layers.count() != 0 || h.host.system("c1") != nil {
		t.Error("bad spec changed something")
	}
}
