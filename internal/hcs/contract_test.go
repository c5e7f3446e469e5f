package hcs

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// The contract suite: what runhcs relies on HCS for, exercised through this package. It is
// written against the HCS contract, not the emulator: the environment (requireContract) is the
// only part that knows it is talking to hcsemu.

const workloadExe = `C:\workload\workload.exe`

func testID(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func containerDoc(image string, mutate ...func(*schema2.Container)) *schema2.ComputeSystem {
	v := schema2.SchemaV21
	c := &schema2.Container{Storage: &schema2.Storage{Path: image}}
	for _, m := range mutate {
		m(c)
	}
	return &schema2.ComputeSystem{Owner: "hcs-contract", SchemaVersion: &v, Container: c}
}

// newContainer creates (and, with start, starts) a container that the test's cleanup removes.
func newContainer(t *testing.T, env *contractEnv, start bool, mutate ...func(*schema2.Container)) *System {
	t.Helper()
	ctx := testCtx(t)
	s, err := env.hcs.CreateComputeSystem(ctx, testID(t), containerDoc(env.image, mutate...))
	if err != nil {
		t.Fatalf("CreateComputeSystem: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Terminate(ctx); err != nil && !errors.Is(err, ErrAlreadyStopped) && !errors.Is(err, ErrNotFound) {
			t.Errorf("cleanup: Terminate %s: %v", s.ID(), err)
		}
		s.Close()
	})
	if start {
		if err := s.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	return s
}

// keepAlive runs a long sleep in s: a container stops when its last process exits (as the
// emulator's contract says, and as a container whose init process ended does), so a test
// that runs processes one after another keeps one running.
func keepAlive(t *testing.T, s *System) *Process {
	t.Helper()
	return run(t, s, &schema2.ProcessParameters{CommandLine: workload("sleep", "600")})
}

func workload(args ...string) string { return workloadExe + " " + strings.Join(args, " ") }

// run starts the workload with the given pipes and returns the process.
func run(t *testing.T, s *System, params *schema2.ProcessParameters) *Process {
	t.Helper()
	p, err := s.CreateProcess(testCtx(t), params)
	if err != nil {
		t.Fatalf("CreateProcess %q: %v", params.CommandLine, err)
	}
	t.Cleanup(func() {
		if in, out, errp := p.Stdio(); true {
			for _, c := range []io.Closer{in, out, errp} {
				if c != nil {
					c.Close()
				}
			}
		}
		p.Close()
	})
	return p
}

// readAll reads r to its end, failing the test after d.
func readAll(t *testing.T, r io.Reader, d time.Duration) string {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	c := make(chan res, 1)
	go func() { b, err := io.ReadAll(r); c <- res{b, err} }()
	select {
	case r := <-c:
		if r.err != nil && !isPtyEOF(r.err) {
			t.Fatalf("read: %v (got %q)", r.err, r.b)
		}
		return string(r.b)
	case <-time.After(d):
		t.Fatalf("no end of output after %v", d)
		return ""
	}
}

// isPtyEOF: reading the master of a pseudo console whose other side closed ends with EIO.
func isPtyEOF(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "input/output error")
}

func waitExit(t *testing.T, p *Process, d time.Duration) int {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(d):
		t.Fatalf("process %d has not exited after %v", p.Pid(), d)
	}
	code, err := p.ExitCode()
	if err != nil {
		t.Fatalf("ExitCode of %d: %v", p.Pid(), err)
	}
	return code
}

// readLine reads one line from a buffered reader within d.
func readLine(t *testing.T, r *bufio.Reader, d time.Duration) string {
	t.Helper()
	c := make(chan string, 1)
	go func() { s, _ := r.ReadString('\n'); c <- s }()
	select {
	case s := <-c:
		return strings.TrimRight(s, "\r\n")
	case <-time.After(d):
		t.Fatalf("no line after %v", d)
		return ""
	}
}

func TestContractLifecycle(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)
	s := newContainer(t, env, false)

	state := func(want schema2.State) {
		t.Helper()
		props, err := s.Properties(ctx)
		if err != nil {
			t.Fatalf("Properties: %v", err)
		}
		if props.State != want || props.Id != s.ID() || props.SystemType != schema2.SystemTypeContainer {
			t.Fatalf("Properties = {Id %q, SystemType %q, State %q}; want %q, Container, %q", props.Id, props.SystemType, props.State, s.ID(), want)
		}
	}
	state(schema2.StateCreated)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	state(schema2.StateRunning)
	keepAlive(t, s)

	list, err := env.hcs.EnumerateComputeSystems(ctx, &schema2.SystemQuery{Ids: []string{s.ID()}})
	if err != nil || len(list) != 1 || list[0].Id != s.ID() {
		t.Fatalf("env.hcs.EnumerateComputeSystems(Ids: %s) = %+v, %v", s.ID(), list, err)
	}
	all, err := env.hcs.EnumerateComputeSystems(ctx, nil)
	if err != nil || !containsID(all, s.ID()) {
		t.Fatalf("env.hcs.EnumerateComputeSystems(nil) lacks %s: %v", s.ID(), err)
	}

	for _, code := range []int{0, 3, 255} {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("exit", fmt.Sprint(code))})
		if got := waitExit(t, p, 30*time.Second); got != code {
			t.Errorf("exit %d: ExitCode = %d", code, got)
		}
		st, err := p.Properties(ctx)
		if err != nil || !st.Exited || int(st.ExitCode) != code || st.ProcessId != p.Pid() {
			t.Errorf("process properties after exit %d = %+v, %v", code, st, err)
		}
	}

	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	state(schema2.StatePaused)
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	state(schema2.StateRunning)

	if err := s.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("Exited not closed after Terminate")
	}
	if err := s.ExitError(); err != nil && !errors.Is(err, ErrUnexpectedExit) {
		t.Logf("ExitError after Terminate: %v", err)
	}
}

func containsID(list []schema2.Properties, id string) bool {
	for _, p := range list {
		if p.Id == id {
			return true
		}
	}
	return false
}

func TestContractHostOSVersion(t *testing.T) {
	env := requireContract(t)
	v, err := env.hcs.HostOSVersion(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("HostOSVersion = %q, want major.minor.build.revision", v)
	}
}

func TestContractStdio(t *testing.T) {
	env := requireContract(t)
	s := newContainer(t, env, true)
	keepAlive(t, s)
	ctx := testCtx(t)

	t.Run("stdout", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("echo", "hello", "from", "hcs"), CreateStdOutPipe: true})
		in, out, errp := p.Stdio()
		if in != nil || errp != nil || out == nil {
			t.Fatalf("Stdio = %v, %v, %v; want stdout only", in, out, errp)
		}
		if got := readAll(t, out, 30*time.Second); got != "hello from hcs\n" {
			t.Errorf("stdout = %q", got)
		}
		if code := waitExit(t, p, 30*time.Second); code != 0 {
			t.Errorf("exit code %d", code)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("stderr", "oops"), CreateStdOutPipe: true, CreateStdErrPipe: true})
		_, out, errp := p.Stdio()
		if got := readAll(t, errp, 30*time.Second); got != "oops\n" {
			t.Errorf("stderr = %q", got)
		}
		if got := readAll(t, out, 30*time.Second); got != "" {
			t.Errorf("stdout = %q, want nothing", got)
		}
		waitExit(t, p, 30*time.Second)
	})
	t.Run("stdin closed by the caller", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("cat"), CreateStdInPipe: true, CreateStdOutPipe: true})
		in, out, _ := p.Stdio()
		if _, err := io.WriteString(in, "ping\npong\n"); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if got := readAll(t, out, 30*time.Second); got != "ping\npong\n" {
			t.Errorf("cat echoed %q", got)
		}
		if code := waitExit(t, p, 30*time.Second); code != 0 {
			t.Errorf("exit code %d", code)
		}
	})
	t.Run("stdin closed through HCS", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("cat"), CreateStdInPipe: true, CreateStdOutPipe: true})
		in, out, _ := p.Stdio()
		if _, err := io.WriteString(in, "data\n"); err != nil {
			t.Fatal(err)
		}
		if err := p.CloseStdin(ctx); err != nil {
			t.Fatalf("CloseStdin: %v", err)
		}
		if got := readAll(t, out, 30*time.Second); got != "data\n" {
			t.Errorf("cat echoed %q", got)
		}
		waitExit(t, p, 30*time.Second)
	})
	t.Run("environment and working directory", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("echo", "ok"), WorkingDirectory: `C:\workload`,
			Environment: map[string]string{"HCS_CONTRACT": "1"}, CreateStdOutPipe: true})
		_, out, _ := p.Stdio()
		if got := readAll(t, out, 30*time.Second); got != "ok\n" {
			t.Errorf("stdout = %q", got)
		}
		waitExit(t, p, 30*time.Second)
	})
}

func TestContractPty(t *testing.T) {
	env := requireContract(t)
	s := newContainer(t, env, true)
	keepAlive(t, s)
	ctx := testCtx(t)

	t.Run("is a console", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("tty"), EmulateConsole: true,
			CreateStdInPipe: true, CreateStdOutPipe: true, ConsoleSize: [2]uint16{24, 80}})
		_, out, errp := p.Stdio()
		if out == nil {
			t.Fatal("no console output stream")
		}
		if errp != nil {
			t.Errorf("a console process has a separate stderr")
		}
		if got := strings.TrimSpace(readAll(t, out, 30*time.Second)); got != "tty" {
			t.Errorf("workload tty printed %q, want tty", got)
		}
		waitExit(t, p, 30*time.Second)
	})
	t.Run("round trip and resize", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("cat"), EmulateConsole: true,
			CreateStdInPipe: true, CreateStdOutPipe: true, ConsoleSize: [2]uint16{24, 80}})
		in, out, _ := p.Stdio()
		if err := p.ResizeConsole(ctx, 120, 40); err != nil {
			t.Fatalf("ResizeConsole: %v", err)
		}
		if _, err := io.WriteString(in, "through the console\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		// The console echoes the input line, then cat writes it back.
		for i := 0; i < 2; i++ {
			if got := readLine(t, br, 30*time.Second); got != "through the console" {
				t.Errorf("console line %d = %q", i, got)
			}
		}
		if ok, err := p.Kill(ctx); !ok || err != nil {
			t.Errorf("Kill = %v, %v", ok, err)
		}
		waitExit(t, p, 30*time.Second)
	})
	t.Run("resize of a pipe process", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("sleep", "30")})
		err := p.ResizeConsole(ctx, 100, 30)
		if err == nil {
			t.Log("ResizeConsole of a process without a console succeeded (HCS ignores it)")
		}
		p.Kill(ctx)
		waitExit(t, p, 30*time.Second)
	})
}

func TestContractCtrlEvents(t *testing.T) {
	env := requireContract(t)
	s := newContainer(t, env, true)
	keepAlive(t, s)
	ctx := testCtx(t)
	tests := []struct {
		signal schema2.ProcessSignal
		want   string
	}{
		{schema2.SignalCtrlC, "got SIGINT"},
		{schema2.SignalCtrlBreak, "got SIGTERM"},
		{schema2.SignalCtrlClose, "got SIGTERM"},
		{schema2.SignalCtrlLogOff, "got SIGTERM"},
		{schema2.SignalCtrlShutdown, "got SIGTERM"},
	}
	for i, tc := range tests {
		t.Run(string(tc.signal), func(t *testing.T) {
			code := 10 + i
			p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("wait-signal", fmt.Sprint(code)), CreateStdOutPipe: true})
			_, out, _ := p.Stdio()
			br := bufio.NewReader(out)
			if got := readLine(t, br, 30*time.Second); got != "waiting" {
				t.Fatalf("first line %q, want waiting", got)
			}
			ok, err := p.Signal(ctx, &schema2.SignalProcessOptions{Signal: tc.signal})
			if !ok || err != nil {
				t.Fatalf("Signal %s = %v, %v", tc.signal, ok, err)
			}
			if got := readLine(t, br, 30*time.Second); got != tc.want {
				t.Errorf("after %s the workload printed %q, want %q", tc.signal, got, tc.want)
			}
			if got := waitExit(t, p, 30*time.Second); got != code {
				t.Errorf("exit code %d, want %d", got, code)
			}
		})
	}
	t.Run("terminate", func(t *testing.T) {
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("wait-signal", "0")})
		if ok, err := p.Kill(ctx); !ok || err != nil {
			t.Fatalf("Kill = %v, %v", ok, err)
		}
		if got := waitExit(t, p, 30*time.Second); got == 0 {
			t.Errorf("a terminated process exited 0")
		}
	})
}

func TestContractErrors(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)

	t.Run("not found", func(t *testing.T) {
		_, err := env.hcs.OpenComputeSystem(ctx, "no-such-system-"+testID(t))
		if !errors.Is(err, ErrNotFound) || !errdefs.IsNotFound(err) {
			t.Fatalf("OpenComputeSystem of an unknown id: %v, want ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "no-such-system-") {
			t.Errorf("error %q does not name the id", err)
		}
	})
	t.Run("already exists", func(t *testing.T) {
		s := newContainer(t, env, false)
		_, err := env.hcs.CreateComputeSystem(ctx, s.ID(), containerDoc(env.image))
		if !errors.Is(err, ErrAlreadyExists) || !errdefs.IsAlreadyExists(err) {
			t.Fatalf("second CreateComputeSystem %s: %v, want ErrAlreadyExists", s.ID(), err)
		}
	})
	t.Run("invalid state", func(t *testing.T) {
		s := newContainer(t, env, false)
		for name, f := range map[string]func(context.Context) error{"Pause": s.Pause, "Resume": s.Resume} {
			if err := f(ctx); !errors.Is(err, ErrInvalidState) || !errdefs.IsFailedPrecondition(err) {
				t.Errorf("%s of a created system: %v, want ErrInvalidState", name, err)
			}
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); !errors.Is(err, ErrInvalidState) {
			t.Errorf("second Start: %v, want ErrInvalidState", err)
		}
		if err := s.Terminate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); !errors.Is(err, ErrInvalidState) {
			t.Errorf("Start of a stopped system: %v, want ErrInvalidState", err)
		}
		if err := s.Terminate(ctx); !errors.Is(err, ErrAlreadyStopped) {
			t.Errorf("second Terminate: %v, want ErrAlreadyStopped", err)
		}
	})
	t.Run("process already stopped", func(t *testing.T) {
		s := newContainer(t, env, true)
		// A second process keeps the container running after the first exits.
		keepAlive(t, s)
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("exit", "0")})
		waitExit(t, p, 30*time.Second)
		ok, err := p.Kill(ctx)
		if ok || !errors.Is(err, ErrProcessAlreadyStopped) {
			t.Errorf("Kill of an exited process = %v, %v; want ErrProcessAlreadyStopped", ok, err)
		}
		ok, err = p.Signal(ctx, &schema2.SignalProcessOptions{Signal: schema2.SignalCtrlC})
		if ok || !errors.Is(err, ErrProcessAlreadyStopped) {
			t.Errorf("Signal of an exited process = %v, %v; want ErrProcessAlreadyStopped", ok, err)
		}
		var e *Error
		if errors.As(err, &e) && (e.Pid != p.Pid() || e.ID != s.ID()) {
			t.Errorf("error %v does not name pid %d of %s", err, p.Pid(), s.ID())
		}
	})
	t.Run("invalid document", func(t *testing.T) {
		id := testID(t)
		_, err := env.hcs.CreateComputeSystem(ctx, id, `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"`+env.image+`"},"NoSuchField":1}}`)
		if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "NoSuchField") {
			t.Fatalf("CreateComputeSystem with an unknown field: %v; want an invalid-argument error naming it", err)
		}
		if _, err := env.hcs.OpenComputeSystem(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("a refused document created %s: %v", id, err)
		}
		_, err = env.hcs.CreateComputeSystem(ctx, id, &schema2.ComputeSystem{Container: &schema2.Container{}})
		if err == nil || !strings.Contains(err.Error(), "SchemaVersion") {
			t.Errorf("CreateComputeSystem without SchemaVersion: %v; want an error naming it", err)
		}
	})
	t.Run("missing executable", func(t *testing.T) {
		s := newContainer(t, env, true)
		keepAlive(t, s)
		_, err := s.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: `C:\nowhere\missing.exe`})
		if !errdefs.IsNotFound(err) {
			t.Errorf("CreateProcess of a missing executable: %v, want a not-found error", err)
		}
	})
	t.Run("timeout names the operation", func(t *testing.T) {
		s := newContainer(t, env, true)
		short, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		<-short.Done()
		err := s.Pause(short)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "PauseComputeSystem") || !strings.Contains(err.Error(), s.ID()) {
			t.Errorf("Pause with an expired context: %v", err)
		}
	})
}

func TestContractLimitsAndStatistics(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)

	t.Run("memory", func(t *testing.T) {
		s := newContainer(t, env, true, func(c *schema2.Container) { c.Memory = &schema2.Memory{SizeInMB: 64} })
		keep := keepAlive(t, s)

		over := run(t, s, &schema2.ProcessParameters{CommandLine: workload("alloc", "200")})
		if code := waitExit(t, over, 60*time.Second); code == 0 {
			t.Errorf("allocating 200 MiB under a 64 MiB limit succeeded")
		}
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("alloc", "24", "30"), CreateStdOutPipe: true})
		_, out, _ := p.Stdio()
		if got := readLine(t, bufio.NewReader(out), 30*time.Second); got != "allocated 24 MiB" {
			t.Fatalf("alloc printed %q", got)
		}
		props, err := s.Properties(ctx, schema2.PropertyTypeStatistics, schema2.PropertyTypeProcessList)
		if err != nil {
			t.Fatal(err)
		}
		st := props.Statistics
		if st == nil || st.Memory == nil || st.Processor == nil {
			t.Fatalf("Statistics = %+v", st)
		}
		if m := st.Memory.MemoryUsageCommitBytes; m < 20<<20 || m > 64<<20 {
			t.Errorf("MemoryUsageCommitBytes = %d, want between 20 MiB and the 64 MiB limit", m)
		}
		// The kernel's accounting may overshoot the limit by a few pages before it reclaims.
		if m := st.Memory.MemoryUsageCommitPeakBytes; m > 65<<20 {
			t.Errorf("MemoryUsageCommitPeakBytes = %d, above the 64 MiB limit", m)
		}
		if st.Timestamp.IsZero() {
			t.Errorf("Statistics.Timestamp not set")
		}
		if !hasPid(props.ProcessList, p.Pid()) || !hasPid(props.ProcessList, keep.Pid()) {
			t.Errorf("ProcessList %+v lacks pids %d and %d", props.ProcessList, p.Pid(), keep.Pid())
		}
		p.Kill(ctx)
		waitExit(t, p, 30*time.Second)

		// Raising the limit through modify lets the same allocation succeed.
		if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMemory,
			RequestType: schema2.RequestTypeUpdate, Settings: 512}); err != nil {
			t.Fatalf("Modify memory: %v", err)
		}
		again := run(t, s, &schema2.ProcessParameters{CommandLine: workload("alloc", "200")})
		if code := waitExit(t, again, 60*time.Second); code != 0 {
			t.Errorf("allocating 200 MiB under a 512 MiB limit: exit code %d", code)
		}
	})
	t.Run("processor", func(t *testing.T) {
		// 20% of one processor: two seconds of spinning may use at most ~0.4 s of CPU time.
		s := newContainer(t, env, true, func(c *schema2.Container) { c.Processor = &schema2.Processor{Count: 1, Maximum: 2000} })
		keepAlive(t, s)
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("spin", "2")})
		waitExit(t, p, 60*time.Second)
		props, err := s.Properties(ctx, schema2.PropertyTypeStatistics)
		if err != nil {
			t.Fatal(err)
		}
		if props.Statistics == nil || props.Statistics.Processor == nil {
			t.Fatalf("no processor statistics: %+v", props.Statistics)
		}
		cpu := time.Duration(props.Statistics.Processor.TotalRuntime100ns * 100)
		if cpu <= 0 || cpu > 1200*time.Millisecond {
			t.Errorf("CPU time of 2 s of spinning at a 20%% limit = %v; want more than 0 and well under 2 s", cpu)
		}
		if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerProcessor,
			RequestType: schema2.RequestTypeUpdate, Settings: &schema2.Processor{Maximum: 10000}}); err != nil {
			t.Errorf("Modify processor: %v", err)
		}
	})
	t.Run("mapped directory", func(t *testing.T) {
		s := newContainer(t, env, true)
		keepAlive(t, s)
		local, host := env.hostDir(t)
		if err := os.WriteFile(filepath.Join(local, "f.txt"), []byte("mapped"), 0o644); err != nil {
			t.Fatal(err)
		}
		md := &schema2.MappedDirectory{HostPath: host, ContainerPath: `C:\data`, ReadOnly: true}
		if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories,
			RequestType: schema2.RequestTypeAdd, Settings: md}); err != nil {
			t.Fatalf("Modify add mapped directory: %v", err)
		}
		// The workload opens the path it is given as it is: "/data/f.txt" is C:\data\f.txt both
		// in the emulator's chroot and on Windows (a rooted path on the current drive).
		p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("read", "/data/f.txt"), CreateStdOutPipe: true, CreateStdErrPipe: true})
		_, out, errp := p.Stdio()
		if got := readAll(t, out, 30*time.Second); got != "mapped" {
			t.Errorf("read through the mapped directory: %q (stderr %q)", got, readAll(t, errp, 30*time.Second))
		}
		if code := waitExit(t, p, 30*time.Second); code != 0 {
			t.Errorf("read through the mapped directory: exit code %d", code)
		}
		if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathContainerMappedDirectories,
			RequestType: schema2.RequestTypeRemove, Settings: md}); err != nil {
			t.Fatalf("Modify remove mapped directory: %v", err)
		}
		gone := run(t, s, &schema2.ProcessParameters{CommandLine: workload("read", "/data/f.txt")})
		if code := waitExit(t, gone, 30*time.Second); code == 0 {
			t.Errorf("the mapped directory is still readable after its removal")
		}
	})
}

// TestContractVirtualMachine is a utility VM as hcsshim makes one (docs/notes/hyperv.md §1): booted
// from the VSMB share "os" holding the EFI boot manager, with memory and processors within what the
// host reports, a guest connection, VSMB shares hot-plugged while it runs, and the states and
// errors of any compute system. (Processes in a VM, hosted containers and the VM as a resource
// boundary are tested against hcsemu itself: they need executables and disks in the emulator's
// formats, which this suite cannot make through Wine's drive Z:.)
func TestContractVirtualMachine(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)
	topo, err := env.hcs.ProcessorTopology(ctx)
	if err != nil {
		t.Fatalf("service property ProcessorTopology: %v", err)
	}
	if int(topo.LogicalProcessorCount) != len(topo.LogicalProcessors) {
		t.Errorf("ProcessorTopology: %d logical processors, %d listed", topo.LogicalProcessorCount, len(topo.LogicalProcessors))
	}
	local, host := env.hostDir(t)
	boot := filepath.Join(local, "UtilityVM", "Files", "EFI", "Microsoft", "Boot")
	if err := os.MkdirAll(boot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(boot, "bootmgfw.efi"), []byte("boot manager"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(local, "share"), 0o755); err != nil {
		t.Fatal(err)
	}
	// host is a path as the service sees it; its separators are the service's.
	sep := "/"
	if strings.Contains(host, `\`) {
		sep = `\`
	}
	osShare, share := host+sep+"UtilityVM"+sep+"Files", host+sep+"share"
	v := schema2.SchemaV21
	vmDoc := func(count uint32) *schema2.ComputeSystem {
		return &schema2.ComputeSystem{Owner: "hcs-contract", SchemaVersion: &v, ShouldTerminateOnLastHandleClosed: true,
			VirtualMachine: &schema2.VirtualMachine{
				StopOnReset: true,
				Chipset:     &schema2.Chipset{Uefi: &schema2.Uefi{BootThis: &schema2.UefiBootEntry{DeviceType: schema2.UVMBootDeviceTypeVmbFs, DevicePath: schema2.UVMBootDevicePath}}},
				ComputeTopology: &schema2.Topology{
					Memory:    &schema2.VirtualMachineMemory{SizeInMB: 256, AllowOvercommit: true, EnableHotHint: true},
					Processor: &schema2.VirtualMachineProcessor{Count: count},
				},
				Devices: &schema2.Devices{VirtualSmb: &schema2.VirtualSmb{DirectFileMappingInMB: 1024, Shares: []schema2.VirtualSmbShare{{
					Name: schema2.UVMOSShareName, Path: osShare,
					Options: &schema2.VirtualSmbShareOptions{ReadOnly: true, ShareRead: true, CacheIo: true, PseudoOplocks: true, TakeBackupPrivilege: true},
				}}}},
				GuestConnection: &schema2.GuestConnection{},
			}}
	}

	// More processors than the host has is refused (hcsshim clamps the count for that reason).
	if s, err := env.hcs.CreateComputeSystem(ctx, testID(t), vmDoc(topo.LogicalProcessorCount+1)); err == nil {
		s.Terminate(ctx)
		s.Close()
		t.Errorf("a VM with %d processors on a host of %d was created", topo.LogicalProcessorCount+1, topo.LogicalProcessorCount)
	} else if !strings.Contains(err.Error(), "Processor.Count") {
		t.Errorf("a VM with too many processors: %v, want an error naming Processor.Count", err)
	}

	s, err := env.hcs.CreateComputeSystem(ctx, testID(t), vmDoc(1))
	if err != nil {
		t.Fatalf("create VM: %v", err)
	}
	t.Cleanup(func() { s.Terminate(context.Background()); s.Close() })
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start VM: %v", err)
	}
	p, err := s.Properties(ctx, schema2.PropertyTypeMemory, schema2.PropertyTypeGuestConnection)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case p.SystemType != schema2.SystemTypeVirtualMachine || p.State != schema2.StateRunning:
		t.Errorf("VM is %s, %s; want VirtualMachine, Running", p.SystemType, p.State)
	case p.Memory == nil || p.Memory.VirtualMachineMemory == nil || p.Memory.VirtualMachineMemory.AssignedMemory != 256<<20/4096:
		t.Errorf("Memory %+v, want 256 MB assigned (in 4 KiB pages)", p.Memory)
	case p.GuestConnectionInfo == nil:
		t.Error("no GuestConnectionInfo: the VM has a GuestConnection")
	}

	add := &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeAdd,
		Settings: schema2.VirtualSmbShare{Name: "s1", Path: share, Options: &schema2.VirtualSmbShareOptions{ReadOnly: true}}}
	if err := s.Modify(ctx, add); err != nil {
		t.Fatalf("add a VSMB share: %v", err)
	}
	if err := s.Modify(ctx, add); err == nil {
		t.Error("a second share named s1 was added")
	}
	remove := &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVSMBShares, RequestType: schema2.RequestTypeRemove, Settings: schema2.VirtualSmbShare{Name: "s1"}}
	if err := s.Modify(ctx, remove); err != nil {
		t.Fatalf("remove the VSMB share: %v", err)
	}
	if err := s.Modify(ctx, remove); err == nil {
		t.Error("a share removed twice")
	}
	if err := s.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: schema2.ResourcePathVMMemory, Settings: 512}); err != nil {
		t.Errorf("resize the VM's memory: %v", err)
	} else if p, err := s.Properties(ctx, schema2.PropertyTypeMemory); err != nil || p.Memory.VirtualMachineMemory.AssignedMemory != 512<<20/4096 {
		t.Errorf("after a resize to 512 MB: %+v, %v", p.Memory, err)
	}

	if err := s.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	case <-ctx.Done():
		t.Fatal("no SystemExited after Terminate")
	}
	if err := s.Start(ctx); !errors.Is(err, ErrInvalidState) {
		t.Errorf("Start of a stopped VM: %v, want ErrInvalidState", err)
	}
}

func hasPid(list []schema2.ProcessDetails, pid uint32) bool {
	for _, d := range list {
		if d.ProcessId == pid {
			return true
		}
	}
	return false
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// bytesBuffer is a strings.Builder safe for a writer goroutine and a reader.
type bytesBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *bytesBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *bytesBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
