package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/server"
	"github.com/openhcs/runhcs/internal/hns/hcn"

	"github.com/openhcs/runhcs/internal/testenv"
)

// These tests run the daemon in-process on a temporary socket and drive it with the real
// client (client.DialHCS), running the workload of the test images (test/workload,
// whose documentation lists its subcommands and what they print) chrooted in a folder that
// stands for a container's volume. They need root (chroot, cgroups, mounts).

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "chroot, cgroups, mounts")
}

// newVolume makes a container volume laid out like the test images' base layer: the workload
// (test/workload) at C:\workload\workload.exe, and C:\Windows\System32 and C:\data, both empty,
// so that a PATH lookup must find the workload in its own folder.
func newVolume(t *testing.T) string {
	t.Helper()
	vol := t.TempDir()
	for _, d := range []string{"workload", "Windows/System32", "data"} {
		if err := os.MkdirAll(filepath.Join(vol, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(workloadBinary.build(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "workload", "workload.exe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return vol
}

type testDaemon struct {
	addr    string // the unix socket
	tcpAddr string // the loopback TCP address the same server serves
	engine  *Engine
	srv     *server.Server
	stop    func()
}

// startDaemon serves a new engine on a unix socket and on loopback TCP, as
// `hcsemu --tcp-address 127.0.0.1:0` does.
func startDaemon(t *testing.T) *testDaemon {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := NewEngine(ctx, Config{Root: filepath.Join(dir, "root"), ShutdownGrace: 2 * time.Second, OSVersion: "10.0.20348.1"})
	if err != nil {
		t.Fatal(err)
	}
	addr := filepath.Join(dir, "hcsemu.sock")
	ln, err := server.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := server.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(e)
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	go func() { done <- srv.ServeTCP(ctx, tln, testKey) }()
	var once sync.Once
	d := &testDaemon{addr: addr, tcpAddr: tln.Addr().String(), engine: e, srv: srv}
	d.stop = func() {
		once.Do(func() {
			ln.Close()
			tln.Close()
			for range 2 {
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}
			srv.Close()
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("engine close: %v", err)
			}
			cancel()
		})
	}
	t.Cleanup(d.stop)
	return d
}

func dial(t *testing.T, d *testDaemon) *client.HCS {
	t.Helper()
	c, err := client.DialHCS(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const opTimeout = 30000 // ms

// run performs one operation-based call and waits for its result.
func run(t *testing.T, api computecore.API, call func(op computecore.Operation) error) (string, error) {
	t.Helper()
	op, err := api.CreateOperation(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	if err := call(op); err != nil {
		return "", err
	}
	return api.WaitForOperationResult(op, opTimeout)
}

func mustRun(t *testing.T, api computecore.API, what string, call func(op computecore.Operation) error) string {
	t.Helper()
	doc, err := run(t, api, call)
	if err != nil {
		t.Fatalf("%s: %v (%s)", what, err, doc)
	}
	return doc
}

func containerConfig(vol string, extra string) string {
	return `{"SchemaVersion":{"Major":2,"Minor":1},"Owner":"hcsemu-test","Container":{"Storage":{"Path":"` + vol + `"}` + extra + `}}`
}

// createSystem creates (and starts, if start) a container system on a fresh volume.
func createSystem(t *testing.T, api computecore.API, id, extra string, start bool) (computecore.System, string) {
	t.Helper()
	vol := newVolume(t)
	op, err := api.CreateOperation(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	cs, err := api.CreateComputeSystem(id, containerConfig(vol, extra), op, 0)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := api.WaitForOperationResult(op, opTimeout); err != nil {
		t.Fatalf("create %s: %v (%s)", id, err, doc)
	}
	if start {
		mustRun(t, api, "start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	}
	t.Cleanup(func() {
		run(t, api, func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
		api.CloseComputeSystem(cs)
	})
	return cs, vol
}

type started struct {
	p              computecore.Process
	pid            uint32
	stdin          *os.File
	stdout, stderr *os.File
	events         chan computecore.Event
	api            computecore.API
}

func startProcess(t *testing.T, api computecore.API, cs computecore.System, params schema2.ProcessParameters) (*started, error) {
	t.Helper()
	b, _ := json.Marshal(params)
	op, err := api.CreateOperation(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	p, err := api.CreateProcess(cs, string(b), op, 0)
	if err != nil {
		return nil, err
	}
	pi, doc, err := api.WaitForOperationResultAndProcessInfo(op, opTimeout)
	if err != nil {
		api.CloseProcess(p)
		return nil, fmt.Errorf("%w (%s)", err, doc)
	}
	s := &started{p: p, pid: pi.ProcessID, events: make(chan computecore.Event, 16), api: api}
	if pi.StdInput != 0 {
		s.stdin = os.NewFile(pi.StdInput, "stdin")
	}
	if pi.StdOutput != 0 {
		s.stdout = os.NewFile(pi.StdOutput, "stdout")
	}
	if pi.StdError != 0 {
		s.stderr = os.NewFile(pi.StdError, "stderr")
	}
	if err := api.SetProcessCallback(p, computecore.EventOptionNone, 0, func(ev computecore.Event, _ uintptr) { s.events <- ev }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{s.stdin, s.stdout, s.stderr} {
			if f != nil {
				f.Close()
			}
		}
		api.CloseProcess(p)
	})
	return s, nil
}

func mustStart(t *testing.T, api computecore.API, cs computecore.System, params schema2.ProcessParameters) *started {
	t.Helper()
	s, err := startProcess(t, api, cs, params)
	if err != nil {
		t.Fatalf("create process %q: %v", params.CommandLine, err)
	}
	return s
}

// exitCode waits for the ProcessExited callback and returns the exit code it carries; it
// checks that WaitForProcessExit agrees.
func (s *started) exitCode(t *testing.T) uint32 {
	t.Helper()
	select {
	case ev := <-s.events:
		if ev.Type != computecore.EventProcessExited {
			t.Fatalf("event %v, want ProcessExited", ev.Type)
		}
		var d schema2.ProcessExitedEventData
		if err := json.Unmarshal([]byte(ev.EventData), &d); err != nil {
			t.Fatalf("exit event %q: %v", ev.EventData, err)
		}
		doc, err := s.api.WaitForProcessExit(s.p, 1000)
		if err != nil || doc != ev.EventData {
			t.Errorf("WaitForProcessExit = %q, %v; want %q", doc, err, ev.EventData)
		}
		return d.ExitCode
	case <-time.After(30 * time.Second):
		t.Fatalf("process %d did not exit", s.pid)
	}
	return 0
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := io.ReadAll(f)
	if err != nil && !errors.Is(err, syscall.EIO) { // a pty master reads EIO once the slave closes
		t.Fatalf("read %s: %v", f.Name(), err)
	}
	return string(b)
}

// prog is the workload, as newVolume places it.
const prog = `C:\workload\workload.exe`

func TestDaemonProcesses(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, vol := createSystem(t, api, "procs", `,"Processor":{"Count":1},"Memory":{"SizeInMB":256}`, true)
	// A container ends with its last process: keep one running while the others come and go.
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})

	t.Run("stdout and exit code", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` echo "hello world" from\"emu`, CreateStdOutPipe: true, CreateStdErrPipe: true})
		if got := readAll(t, s.stdout); got != "hello world from\"emu\n" {
			t.Errorf("stdout %q", got)
		}
		if code := s.exitCode(t); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` stderr oops`, CreateStdOutPipe: true, CreateStdErrPipe: true})
		if got := readAll(t, s.stderr); got != "oops\n" {
			t.Errorf("stderr %q", got)
		}
		if got := readAll(t, s.stdout); got != "" {
			t.Errorf("stdout %q, want nothing", got)
		}
		s.exitCode(t)
	})
	t.Run("exit code", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` exit 42`})
		if code := s.exitCode(t); code != 42 {
			t.Errorf("exit code %d, want 42", code)
		}
		// Properties of an exited process.
		doc := mustRun(t, api, "process properties", func(op computecore.Operation) error { return api.GetProcessProperties(s.p, op, "") })
		var st schema2.ProcessStatus
		if err := json.Unmarshal([]byte(doc), &st); err != nil || !st.Exited || st.ExitCode != 42 || st.ProcessId != s.pid {
			t.Errorf("process properties %s (%v)", doc, err)
		}
	})
	t.Run("environment, working directory and PATH lookup", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{
			CommandLine:      `workload env FOO Path`,
			WorkingDirectory: `C:\DATA`,
			Environment:      map[string]string{"FOO": "bar baz", "Path": `C:\Windows\System32;C:\WORKLOAD`},
			CreateStdOutPipe: true,
		})
		if got, want := readAll(t, s.stdout), "FOO=bar baz\nPath=C:\\Windows\\System32;C:\\WORKLOAD\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		s.exitCode(t)
		s = mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` pwd`, WorkingDirectory: `C:\DATA`, CreateStdOutPipe: true})
		if got := readAll(t, s.stdout); got != "/data\n" {
			t.Errorf("working directory %q, want /data (C:\\data)", got)
		}
		s.exitCode(t)
	})
	t.Run("stdin and CloseHandle", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` cat`, CreateStdInPipe: true, CreateStdOutPipe: true})
		if _, err := s.stdin.WriteString("line one\nline two\n"); err != nil {
			t.Fatal(err)
		}
		// The client keeps its end open: closing HCS's side must still end the input.
		mustRun(t, api, "close stdin", func(op computecore.Operation) error {
			return api.ModifyProcess(s.p, op, `{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`)
		})
		if got := readAll(t, s.stdout); got != "line one\nline two\n" {
			t.Errorf("stdout %q", got)
		}
		if code := s.exitCode(t); code != 0 {
			t.Errorf("exit code %d", code)
		}
	})
	t.Run("pseudo console", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` tty size`, EmulateConsole: true, ConsoleSize: [2]uint16{25, 80}, CreateStdInPipe: true, CreateStdOutPipe: true})
		if s.stdin == nil || s.stdout == nil || s.stderr != nil {
			t.Fatalf("console handles: in %v out %v err %v", s.stdin, s.stdout, s.stderr)
		}
		r := bufio.NewReader(s.stdout)
		if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "tty" {
			t.Fatalf("first line %q, %v; want tty", line, err)
		}
		mustRun(t, api, "resize", func(op computecore.Operation) error {
			return api.ModifyProcess(s.p, op, `{"Operation":"ConsoleSize","ConsoleSize":{"Height":30,"Width":100}}`)
		})
		s.stdin.WriteString("\n")
		var out strings.Builder
		for {
			line, err := r.ReadString('\n')
			out.WriteString(line)
			if strings.Contains(out.String(), "size") || err != nil {
				break
			}
		}
		if !strings.Contains(out.String(), "size 30 100") {
			t.Errorf("output %q, want the new size 30x100", out.String())
		}
		s.exitCode(t)
	})
	t.Run("pseudo console without a size", func(t *testing.T) {
		// HCS's default, 80 columns by 25 rows, not a 0x0 terminal.
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` tty size`, EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true})
		s.stdin.WriteString("\n")
		var out strings.Builder
		r := bufio.NewReader(s.stdout)
		for !strings.Contains(out.String(), "size") {
			line, err := r.ReadString('\n')
			out.WriteString(line)
			if err != nil {
				break
			}
		}
		if !strings.Contains(out.String(), "size 25 80") {
			t.Errorf("output %q, want the default size 25x80", out.String())
		}
		s.exitCode(t)
	})
	t.Run("no console is not a tty", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` tty`, CreateStdOutPipe: true})
		if got := readAll(t, s.stdout); got != "notty\n" {
			t.Errorf("stdout %q", got)
		}
		s.exitCode(t)
	})
	t.Run("control events", func(t *testing.T) {
		for _, tt := range []struct {
			signal schema2.ProcessSignal
			want   string
		}{{schema2.SignalCtrlC, "got SIGINT"}, {schema2.SignalCtrlBreak, "got SIGTERM"}, {schema2.SignalCtrlShutdown, "got SIGTERM"}} {
			s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` wait-signal 7`, CreateStdOutPipe: true})
			r := bufio.NewReader(s.stdout)
			if line, _ := r.ReadString('\n'); line != "waiting\n" {
				t.Fatalf("got %q, want waiting", line)
			}
			mustRun(t, api, "signal", func(op computecore.Operation) error {
				return api.SignalProcess(s.p, op, `{"Signal":"`+string(tt.signal)+`"}`)
			})
			if line, _ := r.ReadString('\n'); line != tt.want+"\n" {
				t.Errorf("%s delivered %q, want %s", tt.signal, line, tt.want)
			}
			if code := s.exitCode(t); code != 7 {
				t.Errorf("exit code %d, want 7", code)
			}
			_, err := run(t, api, func(op computecore.Operation) error { return api.SignalProcess(s.p, op, `{"Signal":"CtrlC"}`) })
			if !errors.Is(err, computecore.HCS_E_PROCESS_ALREADY_STOPPED) {
				t.Errorf("signal after exit: %v, want HCS_E_PROCESS_ALREADY_STOPPED", err)
			}
		}
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` wait-signal 7`})
		_, err := run(t, api, func(op computecore.Operation) error { return api.SignalProcess(s.p, op, `{"Signal":"CtrlX"}`) })
		if !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(err.Error(), "E_INVALIDARG") {
			t.Errorf("bad signal: %v, want E_INVALIDARG", err)
		}
		mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateProcess(s.p, op, "") })
		if code := s.exitCode(t); code != exitCodeTerminated {
			t.Errorf("terminated exit code %d, want %d", code, exitCodeTerminated)
		}
		_, err = run(t, api, func(op computecore.Operation) error { return api.TerminateProcess(s.p, op, "") })
		if !errors.Is(err, computecore.HCS_E_PROCESS_ALREADY_STOPPED) {
			t.Errorf("terminate after exit: %v, want HCS_E_PROCESS_ALREADY_STOPPED", err)
		}
	})
	t.Run("missing program", func(t *testing.T) {
		op, _ := api.CreateOperation(0, nil)
		defer api.CloseOperation(op)
		_, err := api.CreateProcess(cs, `{"CommandLine":"C:\\workload\\nothere.exe a"}`, op, 0)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := api.WaitForOperationResult(op, opTimeout)
		if !errors.Is(err, computecore.E_FILE_NOT_FOUND) {
			t.Fatalf("error %v, want ERROR_FILE_NOT_FOUND", err)
		}
		var re schema2.ResultError
		if json.Unmarshal([]byte(doc), &re) != nil || !strings.Contains(re.ErrorMessage, `nothere.exe`) ||
			uint32(re.Error) != uint32(computecore.E_FILE_NOT_FOUND) || len(re.ErrorEvents) == 0 {
			t.Errorf("result document %s does not name the program", doc)
		}
	})
	t.Run("not a program", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(vol, "workload", "text.exe"), []byte("not a program\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := startProcess(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\text.exe`})
		if !errors.Is(err, computecore.E_BAD_EXE_FORMAT) || !strings.Contains(err.Error(), "text.exe") {
			t.Errorf("error %v, want ERROR_BAD_EXE_FORMAT naming text.exe", err)
		}
	})
	t.Run("statistics, limits and process list", func(t *testing.T) {
		// It holds the memory for longer than the test lasts; the test terminates it.
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` alloc 64 600`, CreateStdOutPipe: true})
		r := bufio.NewReader(s.stdout)
		if line, _ := r.ReadString('\n'); line != "allocated 64 MiB\n" {
			t.Fatalf("got %q", line)
		}
		doc := mustRun(t, api, "properties", func(op computecore.Operation) error {
			return api.GetComputeSystemProperties(cs, op, `{"PropertyTypes":["Statistics","ProcessList"]}`)
		})
		var props schema2.Properties
		if err := json.Unmarshal([]byte(doc), &props); err != nil {
			t.Fatal(err)
		}
		st := props.Statistics
		if st == nil || st.Memory == nil || st.Memory.MemoryUsageCommitBytes < 64<<20 || st.Processor == nil || st.Processor.TotalRuntime100ns == 0 {
			t.Errorf("statistics do not show the 64 MiB allocation and CPU time: %s", statsString(st))
		}
		// The process started inside the system's groups (the spawner forks from within them).
		cgs, _ := readProcCgroups(fmt.Sprintf("/proc/%d/cgroup", s.pid))
		for _, c := range cgroupControllers {
			if want := "/" + d.engine.cg.base + "/procs"; cgs[c] != want {
				t.Errorf("process %d is in %s group %q, want %q", s.pid, c, cgs[c], want)
			}
		}
		found := false
		for _, p := range props.ProcessList {
			if p.ProcessId == s.pid && p.ImageName == "workload.exe" {
				found = true
			}
		}
		if !found {
			t.Errorf("process list %+v lacks %d workload.exe", props.ProcessList, s.pid)
		}
		if props.State != schema2.StateRunning || props.Id != "procs" || props.Owner != "hcsemu-test" || props.SystemType != schema2.SystemTypeContainer {
			t.Errorf("basic properties %+v", props)
		}
		// The limits of the document are in force, and Modify changes them.
		g := d.engine.cg.groupFor("procs")
		if got := g.readUint("memory", "memory.limit_in_bytes"); got != 256<<20 {
			t.Errorf("memory limit %d, want 256 MiB", got)
		}
		if got := g.readUint("cpu", "cpu.cfs_quota_us"); got != cfsPeriodUs {
			t.Errorf("cpu quota %d, want one CPU (%d)", got, cfsPeriodUs)
		}
		mustRun(t, api, "modify memory", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/Memory/SizeInMB","RequestType":"Update","Settings":512}`, 0)
		})
		if got := g.readUint("memory", "memory.limit_in_bytes"); got != 512<<20 {
			t.Errorf("memory limit after modify %d, want 512 MiB", got)
		}
		mustRun(t, api, "modify processor", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/Processor","RequestType":"Update","Settings":{"Maximum":5000,"Weight":300}}`, 0)
		})
		if got, want := g.readUint("cpu", "cpu.cfs_quota_us"), uint64(5000*runtime.NumCPU()*cfsPeriodUs/10000); got != want {
			t.Errorf("cpu quota %d, want %d", got, want)
		}
		if got := g.readUint("cpu", "cpu.shares"); got != 300 {
			t.Errorf("cpu shares %d, want 300", got)
		}
		_, err := run(t, api, func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/Processor","RequestType":"Update","Settings":{"Count":-2}}`, 0)
		})
		if !errors.Is(err, computecore.E_INVALIDARG) {
			t.Errorf("negative count: %v, want E_INVALIDARG", err)
		}
		mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateProcess(s.p, op, "") })
		s.exitCode(t)
	})
	t.Run("mapped directory", func(t *testing.T) {
		host := t.TempDir()
		os.WriteFile(filepath.Join(host, "hello.txt"), []byte("from the host"), 0o644)
		settings := fmt.Sprintf(`{"HostPath":%q,"ContainerPath":"C:\\mnt\\host","ReadOnly":true}`, host)
		mustRun(t, api, "map", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Add","Settings":`+settings+`}`, 0)
		})
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` read C:\mnt\host\hello.txt`, CreateStdOutPipe: true})
		if got := readAll(t, s.stdout); got != "from the host" {
			t.Errorf("read %q", got)
		}
		s.exitCode(t)
		mustRun(t, api, "unmap", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Remove","Settings":`+settings+`}`, 0)
		})
		if _, err := os.Stat(filepath.Join(vol, "mnt", "host", "hello.txt")); err == nil {
			t.Error("the mapped directory is still mounted after Remove")
		}
	})
	// The container owns its C: and may rearrange it while a folder is mapped: here it moves
	// the mapped folder's parent away and puts a symlink to a host folder in its place, where
	// something else is mounted. Remove must detach the mapping itself, wherever it is now, and
	// nothing on the host.
	t.Run("mapped directory whose path was changed under it", func(t *testing.T) {
		host, decoy := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(host, "hello.txt"), []byte("from the host"), 0o644)
		if err := os.Mkdir(filepath.Join(decoy, "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("decoy", filepath.Join(decoy, "b"), "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		defer unix.Unmount(filepath.Join(decoy, "b"), unix.MNT_DETACH)
		settings := fmt.Sprintf(`{"HostPath":%q,"ContainerPath":"C:\\a\\b"}`, host)
		mustRun(t, api, "map", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Add","Settings":`+settings+`}`, 0)
		})
		if err := os.Rename(filepath.Join(vol, "a"), filepath.Join(vol, "a-moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(decoy, filepath.Join(vol, "a")); err != nil {
			t.Fatal(err)
		}
		mustRun(t, api, "unmap", func(op computecore.Operation) error {
			return api.ModifyComputeSystem(cs, op, `{"ResourcePath":"Container/MappedDirectories","RequestType":"Remove","Settings":`+settings+`}`, 0)
		})
		if !mounted(t, filepath.Join(decoy, "b")) {
			t.Error("Remove unmounted the host's folder that the container's symlink pointed at")
		}
		if mounted(t, filepath.Join(vol, "a-moved", "b")) {
			t.Error("the mapping is still mounted (at its moved path) after Remove")
		}
	})
}

func TestDaemonStates(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, _ := createSystem(t, api, "states", "", false)
	state := func() schema2.State {
		doc := mustRun(t, api, "properties", func(op computecore.Operation) error { return api.GetComputeSystemProperties(cs, op, "") })
		var p schema2.Properties
		json.Unmarshal([]byte(doc), &p)
		return p.State
	}
	call := func(f func(computecore.System, computecore.Operation, string) error) error {
		_, err := run(t, api, func(op computecore.Operation) error { return f(cs, op, "") })
		return err
	}
	if s := state(); s != schema2.StateCreated {
		t.Fatalf("state %s, want Created", s)
	}
	if err := call(api.PauseComputeSystem); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("pause of a created system: %v", err)
	}
	if _, err := startProcess(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 1"}); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("process in a created system: %v", err)
	}
	if err := call(api.StartComputeSystem); err != nil {
		t.Fatal(err)
	}
	if err := call(api.StartComputeSystem); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("second start: %v", err)
	}
	s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	if err := call(api.PauseComputeSystem); err != nil {
		t.Fatal(err)
	}
	if st := state(); st != schema2.StatePaused {
		t.Errorf("state %s, want Paused", st)
	}
	if got, _ := d.engine.cg.groupFor("states").read("freezer", "freezer.state"); got != "FROZEN" {
		t.Errorf("freezer %q, want FROZEN", got)
	}
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid)); !strings.Contains(string(b), "State:\tD") && !strings.Contains(string(b), "State:\tS") {
		t.Logf("paused process status: %s", b)
	}
	if err := call(api.ShutDownComputeSystem); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("shutdown of a paused system: %v", err)
	}
	if err := call(api.ResumeComputeSystem); err != nil {
		t.Fatal(err)
	}
	if err := call(api.ResumeComputeSystem); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("second resume: %v", err)
	}
	if got, _ := d.engine.cg.groupFor("states").read("freezer", "freezer.state"); got != "THAWED" {
		t.Errorf("freezer %q, want THAWED", got)
	}
	sysEvents := make(chan computecore.Event, 4)
	api.SetComputeSystemCallback(cs, 0, 0, func(ev computecore.Event, _ uintptr) { sysEvents <- ev })
	if err := call(api.TerminateComputeSystem); err != nil {
		t.Fatal(err)
	}
	if code := s.exitCode(t); code != exitCodeTerminated {
		t.Errorf("exit code of a process of a terminated system: %d", code)
	}
	select {
	case ev := <-sysEvents:
		if ev.Type != computecore.EventSystemExited || !strings.Contains(ev.EventData, "ForcedExit") {
			t.Errorf("event %v %s", ev.Type, ev.EventData)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no SystemExited")
	}
	if err := call(api.TerminateComputeSystem); !errors.Is(err, computecore.HCS_E_SYSTEM_ALREADY_STOPPED) {
		t.Errorf("second terminate: %v", err)
	}
	if err := call(api.StartComputeSystem); !errors.Is(err, computecore.HCS_E_INVALID_STATE) {
		t.Errorf("start of a stopped system: %v", err)
	}
	if doc, err := api.WaitForComputeSystemExit(cs, 1000); err != nil || !strings.Contains(doc, "ForcedExit") {
		t.Errorf("WaitForComputeSystemExit = %q, %v", doc, err)
	}
}

func TestDaemonSystemLifecycle(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)

	t.Run("errors and nothing created on failure", func(t *testing.T) {
		vol := newVolume(t)
		op, _ := api.CreateOperation(0, nil)
		defer api.CloseOperation(op)
		bad := `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Pathx":"` + vol + `"}}}`
		cs, err := api.CreateComputeSystem("bad", bad, op, 0)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := api.WaitForOperationResult(op, opTimeout)
		if !errors.Is(err, computecore.HCS_E_INVALID_JSON) || !strings.Contains(doc, "Container.Storage.Pathx: unknown field") {
			t.Errorf("create with an unknown field: %v %s", err, doc)
		}
		api.CloseComputeSystem(cs)
		if _, err := api.OpenComputeSystem("bad", computecore.GenericAll); !errors.Is(err, computecore.HCS_E_SYSTEM_NOT_FOUND) {
			t.Errorf("open after a failed create: %v", err)
		}
		if _, err := api.OpenComputeSystem("nope", computecore.GenericAll); !errors.Is(err, computecore.HCS_E_SYSTEM_NOT_FOUND) {
			t.Errorf("open of an unknown id: %v", err)
		}
		createSystem(t, api, "dup", "", false)
		_, err = run(t, api, func(op computecore.Operation) error {
			_, err := api.CreateComputeSystem("dup", containerConfig(vol, ""), op, 0)
			return err
		})
		if !errors.Is(err, computecore.HCS_E_SYSTEM_ALREADY_EXISTS) {
			t.Errorf("duplicate id: %v", err)
		}
	})
	t.Run("enumerate and service properties", func(t *testing.T) {
		createSystem(t, api, "enum-a", "", false)
		doc := mustRun(t, api, "enumerate", func(op computecore.Operation) error {
			return api.EnumerateComputeSystems(`{"Ids":["enum-a","missing"]}`, op)
		})
		var list []schema2.Properties
		if err := json.Unmarshal([]byte(doc), &list); err != nil || len(list) != 1 || list[0].Id != "enum-a" || list[0].State != schema2.StateCreated {
			t.Errorf("enumerate = %s (%v)", doc, err)
		}
		sp, err := api.GetServiceProperties(`{"PropertyTypes":["Basic"]}`)
		if err != nil || !strings.Contains(sp, `"OsVersion":"10.0.20348.1"`) {
			t.Errorf("service properties %s, %v", sp, err)
		}
	})
	t.Run("a container stops with its last process", func(t *testing.T) {
		cs, _ := createSystem(t, api, "last", "", true)
		events := make(chan computecore.Event, 4)
		api.SetComputeSystemCallback(cs, 0, 0, func(ev computecore.Event, _ uintptr) { events <- ev })
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " exit 0"})
		s.exitCode(t)
		select {
		case ev := <-events:
			if ev.Type != computecore.EventSystemExited {
				t.Errorf("event %v", ev.Type)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the system did not stop after its last process")
		}
	})
	t.Run("the memory limit holds", func(t *testing.T) {
		cs, _ := createSystem(t, api, "oom", `,"Memory":{"SizeInMB":32}`, true)
		mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
		// Were it not killed it would hold the memory, and so stay in the system, for 10 minutes.
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " alloc 100 600", CreateStdOutPipe: true})
		if got := readAll(t, s.stdout); strings.Contains(got, "allocated") {
			t.Errorf("allocated 100 MiB under a 32 MiB limit")
		}
		if code := s.exitCode(t); code != exitCodeTerminated {
			t.Errorf("exit code %d, want %d (killed by the OOM killer)", code, exitCodeTerminated)
		}
	})
	t.Run("shutdown sends CtrlShutdown", func(t *testing.T) {
		cs, _ := createSystem(t, api, "shutdown", "", true)
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " wait-signal 3", CreateStdOutPipe: true})
		r := bufio.NewReader(s.stdout)
		if line, _ := r.ReadString('\n'); line != "waiting\n" {
			t.Fatalf("got %q, want waiting", line)
		}
		mustRun(t, api, "shutdown", func(op computecore.Operation) error { return api.ShutDownComputeSystem(cs, op, "") })
		if line, _ := r.ReadString('\n'); line != "got SIGTERM\n" {
			t.Errorf("got %q, want got SIGTERM", line)
		}
		if code := s.exitCode(t); code != 3 {
			t.Errorf("exit code %d", code)
		}
		if doc, err := api.WaitForComputeSystemExit(cs, 5000); err != nil || !strings.Contains(doc, "GracefulExit") {
			t.Errorf("exit status %s, %v", doc, err)
		}
	})
	t.Run("CtrlShutdown ends a process that does not handle it", func(t *testing.T) {
		cs, _ := createSystem(t, api, "unhandled", "", true)
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
		mustRun(t, api, "shutdown", func(op computecore.Operation) error { return api.ShutDownComputeSystem(cs, op, "") })
		if code := s.exitCode(t); code != exitCodeCtrlC {
			t.Errorf("exit code %#x, want STATUS_CONTROL_C_EXIT", code)
		}
	})
	t.Run("shutdown terminates a process that ignores it after the grace period", func(t *testing.T) {
		cs, _ := createSystem(t, api, "stubborn", "", true)
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " ignore-signals", CreateStdOutPipe: true})
		if line, _ := bufio.NewReader(s.stdout).ReadString('\n'); line != "ignoring\n" {
			t.Fatalf("got %q, want ignoring", line)
		}
		begin := time.Now()
		mustRun(t, api, "shutdown", func(op computecore.Operation) error { return api.ShutDownComputeSystem(cs, op, "") })
		if took := time.Since(begin); took < 2*time.Second {
			t.Errorf("shutdown took %v, less than the 2s grace period", took)
		}
		if code := s.exitCode(t); code != exitCodeTerminated {
			t.Errorf("exit code %d, want %d", code, exitCodeTerminated)
		}
		if doc, err := api.WaitForComputeSystemExit(cs, 5000); err != nil || !strings.Contains(doc, "ForcedExit") {
			t.Errorf("exit status %s, %v", doc, err)
		}
	})
	t.Run("a cancelled shutdown returns and leaves the system running", func(t *testing.T) {
		cs, _ := createSystem(t, api, "cancelled", "", true)
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " ignore-signals", CreateStdOutPipe: true})
		if line, _ := bufio.NewReader(s.stdout).ReadString('\n'); line != "ignoring\n" {
			t.Fatalf("got %q, want ignoring", line)
		}
		op, _ := api.CreateOperation(0, nil)
		defer api.CloseOperation(op)
		if err := api.ShutDownComputeSystem(cs, op, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := api.WaitForOperationResult(op, 100); !errors.Is(err, computecore.E_WAIT_TIMEOUT) {
			t.Fatalf("wait 100ms: %v, want WAIT_TIMEOUT", err)
		}
		if err := api.CancelOperation(op); err != nil {
			t.Fatal(err)
		}
		if _, err := api.WaitForOperationResult(op, 1000); err == nil {
			t.Error("a cancelled shutdown succeeded")
		}
		if err := api.GetProcessProperties(s.p, 0, ""); err == nil {
			t.Error("GetProcessProperties accepted an invalid operation handle")
		}
	})
}

// TestDaemonClients checks that systems outlive the client that made them, and that clients see
// everything exit when the daemon goes away.
func TestDaemonClients(t *testing.T) {
	d := startDaemon(t)
	a, err := client.DialHCS(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	vol := newVolume(t)
	mustRun(t, a, "create", func(op computecore.Operation) error {
		_, err := a.CreateComputeSystem("shared", containerConfig(vol, ""), op, 0)
		return err
	})
	csA, err := a.OpenComputeSystem("shared", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, a, "start", func(op computecore.Operation) error { return a.StartComputeSystem(csA, op, "") })
	pa := mustStart(t, a, csA, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	a.Close() // the first client dies

	b := dial(t, d)
	cs, err := b.OpenComputeSystem("shared", computecore.GenericAll)
	if err != nil {
		t.Fatalf("open from a second client: %v", err)
	}
	p, err := b.OpenProcess(cs, pa.pid, computecore.GenericAll)
	if err != nil {
		t.Fatalf("open process %d: %v", pa.pid, err)
	}
	mustRun(t, b, "terminate process", func(op computecore.Operation) error { return b.TerminateProcess(p, op, "") })
	doc, err := b.WaitForProcessExit(p, opTimeout)
	var ex schema2.ProcessExitedEventData
	if err != nil || json.Unmarshal([]byte(doc), &ex) != nil || ex.ExitCode != exitCodeTerminated {
		t.Errorf("exit %s, %v", doc, err)
	}
	_, err = run(t, b, func(op computecore.Operation) error { return b.TerminateComputeSystem(cs, op, "") })
	if err != nil && !errors.Is(err, computecore.HCS_E_SYSTEM_ALREADY_STOPPED) {
		t.Errorf("terminate: %v", err)
	}
	b.CloseProcess(p)
	b.CloseComputeSystem(cs)

	// The daemon goes away: every handle sees its system and process exit, then disconnect.
	cs2, _ := createSystem(t, b, "doomed", "", true)
	sysEvents := make(chan computecore.Event, 4)
	b.SetComputeSystemCallback(cs2, 0, 0, func(ev computecore.Event, _ uintptr) { sysEvents <- ev })
	s := mustStart(t, b, cs2, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	d.stop()
	for _, want := range []computecore.EventType{computecore.EventSystemExited, computecore.EventServiceDisconnect} {
		select {
		case ev := <-sysEvents:
			if ev.Type != want {
				t.Errorf("system event %v, want %v", ev.Type, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v after the daemon stopped", want)
		}
	}
	select {
	case ev := <-s.events:
		if ev.Type != computecore.EventProcessExited {
			t.Errorf("process event %v", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ProcessExited after the daemon stopped")
	}
	if _, err := run(t, b, func(op computecore.Operation) error { return b.StartComputeSystem(cs2, op, "") }); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("call after the daemon stopped: %v, want HCS_E_SERVICE_DISCONNECT", err)
	}
	if _, err := b.OpenComputeSystem("doomed", computecore.GenericAll); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("open after the daemon stopped: %v", err)
	}
	// Its processes are gone with it.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(int(s.pid), 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(int(s.pid), 0) == nil {
		t.Errorf("process %d outlived the daemon", s.pid)
	}
}

func TestDialError(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "none.sock")
	_, err := client.DialHCS(addr)
	if err == nil {
		t.Fatal("dialed nothing")
	}
	want := "the HCS emulator is not running at " + addr + ": start it with `hcsemu --address " + addr + "`"
	if !strings.Contains(err.Error(), want) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("error %q, want it to say %q and wrap ENOENT", err, want)
	}
}

// statsString spells out the parts of st that a failure message needs (%+v prints pointers).
func statsString(st *schema2.Statistics) string {
	if st == nil {
		return "none"
	}
	b, _ := json.Marshal(st)
	return string(b)
}

// networkDoc is an HCN network document of a NAT network on subnet with gateway gw (as
// internal/hcsemu/hns's tests make theirs), for the tests that give a daemon's containers a
// network.
func networkDoc(name, subnet, gw string) string {
	b, _ := json.Marshal(hcn.HostComputeNetwork{Name: name, Type: hcn.NAT, Ipams: []hcn.Ipam{{Subnets: []hcn.Subnet{{
		IpAddressPrefix: subnet, Routes: []hcn.Route{{NextHop: gw, DestinationPrefix: "0.0.0.0/0"}},
	}}}}})
	return string(b)
}
