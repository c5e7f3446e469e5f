package compute

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// TestDaemonSiloProcesses: a process-isolated container's processes see that container's
// processes only (the workload's ps lists /proc, as its Get-Process stand-in does): its silo
// init and its own processes, never the host's or another container's. A process of the
// container that exits, the first one included, takes none of the others with it (HCS ends a
// container's processes only when the container stops). C:\proc goes when the container stops.
func TestDaemonSiloProcesses(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	a, volA := createSystem(t, api, "silo-a", "", true)
	b, volB := createSystem(t, api, "silo-b", "", true)
	// Container b runs the workload under another name, which a's list must not show.
	exe, err := os.ReadFile(filepath.Join(volB, "workload", "workload.exe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volB, "workload", "other.exe"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	mustStart(t, api, b, schema2.ProcessParameters{CommandLine: `C:\workload\other.exe sleep 600`})

	// a's first process, then a second one.
	first := mustStart(t, api, a, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 600`})
	second := mustStart(t, api, a, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 601`})

	ps := func(t *testing.T, cs computecore.System) []string {
		t.Helper()
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe ps`, CreateStdOutPipe: true})
		out := readAll(t, s.stdout)
		if code := s.exitCode(t); code != 0 {
			t.Fatalf("ps: exit code %d, output %q", code, out)
		}
		// "PID name" lines; the init's threads take PIDs of the namespace too, so only PID 1
		// is known in advance.
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			pid, name, _ := strings.Cut(l, " ")
			if name == siloInitName && pid != "1" {
				t.Errorf("the silo init is PID %s, want 1", pid)
			}
			names = append(names, name)
		}
		return names
	}
	// The silo init, then a's processes: the two sleepers and ps itself. Nothing else: not
	// the daemon, not this test, not b's sleeper.
	want := []string{siloInitName, `C:\workload\workload.exe`, `C:\workload\workload.exe`, `C:\workload\workload.exe`}
	if got := ps(t, a); !slices.Equal(got, want) {
		t.Errorf("processes in container a: %q, want %q", got, want)
	}
	if got, want := ps(t, b), []string{siloInitName, `C:\workload\other.exe`, `C:\workload\workload.exe`}; !slices.Equal(got, want) {
		t.Errorf("processes in container b: %q, want %q", got, want)
	}

	// The first process ends; the second goes on running.
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateProcess(first.p, op, "") })
	if code := first.exitCode(t); code != exitCodeTerminated {
		t.Errorf("first process: exit code %d, want %d", code, exitCodeTerminated)
	}
	// The init, the second sleeper and ps.
	if got, want := ps(t, a), []string{siloInitName, `C:\workload\workload.exe`, `C:\workload\workload.exe`}; !slices.Equal(got, want) {
		t.Errorf("processes in container a after its first process ended: %q, want %q", got, want)
	}
	select {
	case ev := <-second.events:
		t.Fatalf("the second process ended with the first: %v %s", ev.Type, ev.EventData)
	default:
	}

	// The host sees the container's procfs at its C:\proc while it runs, and no folder once it
	// stopped; the container's processes end with it.
	if _, err := os.Stat(filepath.Join(volA, "proc", "1", "cmdline")); err != nil {
		t.Errorf("C:\\proc of a running container: %v", err)
	}
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(a, op, "") })
	if code := second.exitCode(t); code != exitCodeTerminated {
		t.Errorf("second process after the container stopped: exit code %d, want %d", code, exitCodeTerminated)
	}
	if _, err := os.Lstat(filepath.Join(volA, "proc")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("C:\\proc after the container stopped: %v, want it gone", err)
	}
	if _, err := os.Lstat(filepath.Join(volB, "proc", "1")); err != nil {
		t.Errorf("the other container's C:\\proc after the first stopped: %v", err)
	}
}

// TestDaemonSiloProcDirTaken: a container whose C:\proc is a file does not start (hcsemu would
// have to hide it), and says why; the file stays.
func TestDaemonSiloProcDirTaken(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, vol := createSystem(t, api, "silo-taken", "", false)
	if err := os.WriteFile(filepath.Join(vol, "proc"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := run(t, api, func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	if err == nil || !strings.Contains(doc, `C:\\proc exists and is not a folder`) {
		t.Fatalf("start with a file at C:\\proc: %v (%s)", err, doc)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "proc")); err != nil || string(b) != "mine" {
		t.Errorf("C:\\proc after the failed start: %q, %v", b, err)
	}
}

// TestDaemonSiloProcDirOfImage: an image's own empty C:\proc is used and kept after the
// container stops; one holding files is not hidden: the container does not start.
func TestDaemonSiloProcDirOfImage(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, vol := createSystem(t, api, "silo-empty", "", false)
	if err := os.Mkdir(filepath.Join(vol, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, api, "start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	if _, err := os.Stat(filepath.Join(vol, "proc", "1", "cmdline")); err != nil {
		t.Errorf("C:\\proc of the running container: %v", err)
	}
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	if names, err := os.ReadDir(filepath.Join(vol, "proc")); err != nil || len(names) != 0 {
		t.Errorf("the image's C:\\proc after the container stopped: %v, %v; want it kept, empty", names, err)
	}

	cs, vol = createSystem(t, api, "silo-full", "", false)
	if err := os.MkdirAll(filepath.Join(vol, "proc", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc, err := run(t, api, func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	if err == nil || !strings.Contains(doc, `C:\\proc is not empty`) {
		t.Fatalf("start with files in C:\\proc: %v (%s)", err, doc)
	}
	if _, err := os.Stat(filepath.Join(vol, "proc", "data")); err != nil {
		t.Errorf("the image's C:\\proc\\data after the failed start: %v", err)
	}
}

// TestDaemonSiloStartCancelled: a start whose caller has gone (a shim killed while its
// StartComputeSystem was held) stops the silo init it has just spawned, possibly before the
// init installed its SIGTERM handler, when the kernel drops the signal (pid_namespaces(7)).
// Nothing may be left mounted on C:\proc, and the start must not wait out the kill deadline.
func TestDaemonSiloStartCancelled(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	for i := range 5 {
		id := fmt.Sprintf("silo-cancelled-%d", i)
		_, vol := createSystem(t, api, id, "", false)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := d.engine.Start(ctx, wire.SystemRef{ID: id}, ""); err == nil {
			t.Fatalf("start of %s with its caller gone: no error", id)
		}
		if _, err := os.Lstat(filepath.Join(vol, "proc")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("C:\\proc of %s after the cancelled start: %v; want it gone", id, err)
		}
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(mounts), " "+filepath.Join(vol, "proc")+" ") {
			t.Errorf("C:\\proc of %s is still mounted after the cancelled start", id)
		}
	}
}
