package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sub", "f.txt")
	t.Setenv("WORKLOAD_TEST_VAR", "v1")
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string // substring
	}{
		{name: "echo", args: []string{"echo", "hello from", "a windows container"}, wantStdout: "hello from a windows container\n"},
		{name: "echo nothing", args: []string{"echo"}, wantStdout: "\n"},
		{name: "stderr", args: []string{"stderr", "oops", "1"}, wantStderr: "oops 1\n"},
		{name: "args", args: []string{"args", "a b", `c"d`}, wantStdout: "\"a b\"\n\"c\\\"d\"\n"},
		{name: "exit", args: []string{"exit", "42"}, wantCode: 42},
		{name: "exit zero", args: []string{"exit", "0"}},
		{name: "exit bad", args: []string{"exit", "x"}, wantCode: 2, wantStderr: `exit code "x" is not an integer`},
		{name: "exit missing", args: []string{"exit"}, wantCode: 2, wantStderr: "missing exit code"},
		{name: "sleep", args: []string{"sleep", "0.01"}},
		{name: "sleep negative", args: []string{"sleep", "-1"}, wantCode: 2, wantStderr: "non-negative"},
		{name: "cat", args: []string{"cat"}, stdin: "line1\nline2", wantStdout: "line1\nline2"},
		{name: "env named", args: []string{"env", "WORKLOAD_TEST_VAR", "WORKLOAD_UNSET_VAR"}, wantStdout: "WORKLOAD_TEST_VAR=v1\nWORKLOAD_UNSET_VAR is not set\n"},
		{name: "write", args: []string{"write", file, "some text"}},
		{name: "read", args: []string{"read", file}, wantStdout: "some text"},
		{name: "read missing", args: []string{"read", filepath.Join(dir, "nope")}, wantCode: 1, wantStderr: "nope"},
		{name: "write usage", args: []string{"write", file}, wantCode: 2, wantStderr: "want PATH TEXT"},
		{name: "tty without a terminal", args: []string{"tty"}, wantStdout: "notty\n"},
		{name: "tty size without a terminal", args: []string{"tty", "size"}, stdin: "\n", wantCode: 1, wantStdout: "notty\n", wantStderr: "stdout is not a file"},
		{name: "tty bad argument", args: []string{"tty", "width"}, wantCode: 2, wantStderr: `want no argument, "size" or "watch", got ["width"]`},
		{name: "ignore-signals usage", args: []string{"ignore-signals", "5"}, wantCode: 2, wantStderr: `takes no arguments, got ["5"]`},
		{name: "alloc", args: []string{"alloc", "2"}, wantStdout: "allocated 2 MiB\n"},
		{name: "alloc negative", args: []string{"alloc", "-2"}, wantCode: 2, wantStderr: "negative"},
		{name: "spin", args: []string{"spin", "0.01"}},
		{name: "tick", args: []string{"tick", "0.01", "3"}, wantStdout: "tick 1\ntick 2\ntick 3\n"},
		{name: "tick negative", args: []string{"tick", "0.01", "-1"}, wantCode: 2, wantStderr: "negative"},
		{name: "pipe usage", args: []string{"pipe", `\\.\pipe\p`}, wantCode: 2, wantStderr: "want PIPE"},
		{name: "pipe not a pipe path", args: []string{"pipe", `C:\p`, "x"}, wantCode: 2, wantStderr: `"C:\\p" is not a named pipe path`},
		{name: "unknown", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown subcommand "frobnicate"`},
		{name: "none", args: nil, wantCode: 2, wantStderr: "no subcommand"},
	}
	// Order matters for write then read, so no t.Parallel.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if tt.wantStdout != "" && stdout.String() != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantStdout)
			}
			if tt.wantStdout == "" && stdout.Len() != 0 && tt.name != "sleep" {
				t.Errorf("unexpected stdout %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestEnvAllSorted(t *testing.T) {
	t.Setenv("WORKLOAD_A", "1")
	var out bytes.Buffer
	if code := run([]string{"env"}, nil, &out, &out); code != 0 {
		t.Fatalf("env exited %d: %s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	found := false
	for i, l := range lines {
		if i > 0 && lines[i-1] > l {
			t.Errorf("env output not sorted: %q before %q", lines[i-1], l)
		}
		found = found || l == "WORKLOAD_A=1"
	}
	if !found {
		t.Errorf("WORKLOAD_A=1 missing from %q", out.String())
	}
}

// TestConsoleSizeOfAPipe: a pipe has no console size, and the error says which call refused it
// (or, where there is none, that the platform has no tty size).
func TestConsoleSizeOfAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	want := map[string]string{"linux": "TIOCGWINSZ", "windows": "GetConsoleScreenBufferInfo"}[runtime.GOOS]
	if want == "" {
		want = "not supported"
	}
	rows, cols, err := consoleSize(w)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("consoleSize(pipe) = %d, %d, %v; want an error naming %s", rows, cols, err, want)
	}
	if isTerminal(w) {
		t.Error("isTerminal(pipe) = true")
	}
}

// buildWorkload builds the real binary once for the tests that need a process.
func buildWorkload(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "workload")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("signals are tested on Linux; Windows console events need a console")
	}
	bin := buildWorkload(t)

	t.Run("tty without terminal", func(t *testing.T) {
		out, err := exec.Command(bin, "tty").Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != "notty\n" {
			t.Fatalf("tty = %q, want notty", out)
		}
	})

	t.Run("tty on a pty", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatalf("open pty: %v", err)
		}
		defer ptmx.Close()
		cmd := exec.Command(bin, "tty")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		out, _ := io.ReadAll(ptmx) // ends with EIO once the slave side is closed
		if strings.TrimSpace(string(out)) != "tty" {
			t.Fatalf("tty on a pty printed %q, want tty", out)
		}
	})

	t.Run("tty size on a pty", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatalf("open pty: %v", err)
		}
		defer ptmx.Close()
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 25, Cols: 80}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "tty", "size")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		defer cmd.Process.Kill()
		r := bufio.NewReader(ptmx)
		if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "tty" {
			t.Fatalf("first line %q, %v; want tty", line, err)
		}
		// The size asked for is the one at the time of the answer, not at the start.
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		if _, err := ptmx.WriteString("\n"); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "size") {
			line, err := r.ReadString('\n') // the echoed newline comes first
			out.WriteString(line)
			if err != nil {
				break
			}
		}
		if !strings.Contains(out.String(), "size 30 100\r\n") {
			t.Errorf("output after the resize %q, want size 30 100", out.String())
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("tty size: %v", err)
		}
	})

	t.Run("tty watch on a pty", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatalf("open pty: %v", err)
		}
		defer ptmx.Close()
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 25, Cols: 80}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "tty", "watch")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		defer cmd.Process.Kill()
		r := bufio.NewReader(ptmx)
		want := func(line string) {
			t.Helper()
			for {
				got, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("no %q: %v", line, err)
				}
				if strings.TrimSpace(got) == line {
					return
				}
			}
		}
		want("tty")
		want("size 25 80")
		// Each change is printed, without any input: a test waits for the line.
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		want("size 40 120")
		if _, err := ptmx.WriteString("exit\n"); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("tty watch: %v", err)
		}
	})

	t.Run("ignore-signals", func(t *testing.T) {
		cmd := exec.Command(bin, "ignore-signals")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ignoring\n" {
			_ = cmd.Process.Kill()
			t.Fatalf("first line = %q, %v; want ignoring", line, err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGINT} {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		// Either signal ends an unprepared process at once; half a second is plenty to see it.
		select {
		case err := <-done:
			t.Fatalf("ignore-signals ended after SIGINT and SIGTERM: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("ignore-signals did not end after SIGKILL")
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("ended with %v, want killed by SIGKILL", cmd.ProcessState)
		}
	})

	for _, tt := range []struct {
		sig  syscall.Signal
		want string
		code int
	}{
		{syscall.SIGINT, "got SIGINT", 7},
		{syscall.SIGTERM, "got SIGTERM", 0},
	} {
		t.Run("wait-signal "+tt.want, func(t *testing.T) {
			cmd := exec.Command(bin, "wait-signal", strconv.Itoa(tt.code))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(stdout)
			line, err := r.ReadString('\n')
			if err != nil || line != "waiting\n" {
				t.Fatalf("first line = %q, %v; want waiting", line, err)
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			line, _ = r.ReadString('\n')
			if strings.TrimSpace(line) != tt.want {
				t.Errorf("after %v printed %q, want %q", tt.sig, line, tt.want)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("workload did not exit after the signal")
			}
			if got := cmd.ProcessState.ExitCode(); got != tt.code {
				t.Errorf("exit code = %d, want %d", got, tt.code)
			}
		})
	}
}

func TestHostPath(t *testing.T) {
	if windowsPaths {
		t.Skip("the Windows build opens paths as given")
	}
	for in, want := range map[string]string{
		`C:\data\x.txt`:  "/data/x.txt",
		`c:/data/x.txt`:  "/data/x.txt",
		`C:`:             "/",
		`rel\dir\f`:      "rel/dir/f",
		"/already/unix":  "/already/unix",
		`\\server\share`: "//server/share",
	} {
		if got := hostPath(in); got != want {
			t.Errorf("hostPath(%q) = %q, want %q", in, got, want)
		}
	}
}
