//go:build windows || linux

package hostprocess

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary play a job's keeper (Reexec: the jobs the tests create
// re-execute it) and the container's workload: with RUNHCS_HOSTPROCESS_HELPER set it prints
// its environment variable of that name and exits with code 3 once its stdin ends; set to
// "signal", it waits for a console control event. A platform's own helpers come first
// (platformHelper).
func TestMain(m *testing.M) {
	Reexec()
	if code, ok := platformHelper(); ok {
		os.Exit(code)
	}
	if os.Getenv("RUNHCS_HOSTPROCESS_HELPER") == "signal" {
		os.Exit(waitControlEvent())
	}
	if v, ok := os.LookupEnv("RUNHCS_HOSTPROCESS_HELPER"); ok {
		fmt.Println("helper:" + v + ":" + os.Getenv(MountPointVariable))
		_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// waitControlEvent says "waiting", then which console control event came (the Go runtime
// reports CTRL_C_EVENT and CTRL_BREAK_EVENT as os.Interrupt, the others as SIGTERM) and exits
// with code 5.
func waitControlEvent() int {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	fmt.Println("waiting")
	fmt.Println("got", <-ch)
	return 5
}

// TestJobProcess, the contract both builds run: a process started in a job runs with the
// environment it was given, is listed in the job while it runs, its output and exit code
// arrive; the job's limits change; Terminate ends a running process with exit code 1. (The
// job's accounting, JobObjectBasicAndIoAccountingInformation, and CPU rate control are not
// implemented by Wine 8, under which the Windows build runs in make test-windows: they are
// asserted by the Linux build's own tests, host_linux_test.go.)
func TestJobProcess(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t)
	tok, err := h.Logon(ctx, "", "", true)
	if err != nil {
		t.Fatalf("Logon (inherit): %v", err)
	}
	defer tok.Close()
	id := fmt.Sprintf("runhcs-test-%d", os.Getpid())
	t.Cleanup(func() { _ = h.TerminateJob(ctx, id) })
	job, err := h.CreateJob(ctx, id, Limits{MemoryBytes: 512 << 20})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	defer job.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	p, err := job.Start(ctx, &ProcessSpec{
		CommandLine: `"` + exe + `" -test.run=^$`,
		Dir:         dir,
		Env:         []string{"RUNHCS_HOSTPROCESS_HELPER=one", MountPointVariable + `=C:\hpc\x\`},
		Token:       tok,
		Stdin:       true,
		Stdout:      true,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close()
	in, out, _ := p.Stdio()
	line := make([]byte, 64)
	n, err := out.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(line[:n])); got != `helper:one:C:\hpc\x\` {
		t.Errorf("output %q", got)
	}
	pids, err := job.Pids(ctx)
	if err != nil || !slices.Contains(pids, p.Pid()) {
		t.Errorf("Pids = %v, %v; want %d among them", pids, err, p.Pid())
	}
	_ = in.Close()
	<-p.Exited()
	if code, err := p.ExitCode(); err != nil || code != 3 {
		t.Errorf("exit code %d, %v; want 3", code, err)
	}
	if err := job.SetLimits(ctx, Limits{MemoryBytes: 256 << 20}); err != nil {
		t.Errorf("SetLimits: %v", err)
	}

	// A second process, still running, ends with the job.
	p2, err := job.Start(ctx, &ProcessSpec{CommandLine: `"` + exe + `" -test.run=^$`, Dir: dir,
		Env: []string{"RUNHCS_HOSTPROCESS_HELPER=two"}, Token: tok, Stdin: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p2.Close()
	if err := job.Terminate(ctx); err != nil {
		t.Errorf("Terminate: %v", err)
	}
	<-p2.Exited()
	if code, _ := p2.ExitCode(); code != 1 {
		t.Errorf("exit code after Terminate %d, want 1 (TerminateJobObject's)", code)
	}
	if err := h.TerminateJob(ctx, id+"-none"); err != nil {
		t.Errorf("TerminateJob of no job: %v", err)
	}
}
