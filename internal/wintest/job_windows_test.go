package wintest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The job object classes of a HostProcess container's job (internal/hostprocess) that Wine 8
// lacks and hack/wine/winejob.c fills in. The tests hold for Windows too.

// spinHelperEnv makes the test binary, started by TestJobAccounting, use processor time until
// its own user time is counted, say "ready" and wait for its stdin to close.
const spinHelperEnv = "RUNHCS_WINTEST_SPIN_HELPER"

// spinUntilCounted is the helper.
func spinUntilCounted() int {
	var created, exited, kernel, user windows.Filetime
	x := uint64(1)
	for user.LowDateTime == 0 && user.HighDateTime == 0 {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
			fmt.Println("GetProcessTimes:", err)
			return 1
		}
	}
	fmt.Println("ready", x&1)
	if os.Getenv(spinHelperEnv) == "forever" {
		// Go on using processor time until stdin closes (TestJobCPUHardCap).
		go func() {
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// basicAndIOAccounting is JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION.
type basicAndIOAccounting struct {
	BasicInfo struct {
		TotalUserTime, TotalKernelTime, ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime int64
		TotalPageFaultCount, TotalProcesses, ActiveProcesses, TotalTerminatedProcesses     uint32
	}
	IoInfo windows.IO_COUNTERS
}

const (
	classBasicAndIoAccounting = 8
	classCPURateControl       = 15
)

func newJob(t *testing.T) windows.Handle {
	t.Helper()
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		t.Fatalf("CreateJobObject: %v", err)
	}
	t.Cleanup(func() { windows.CloseHandle(job) })
	return job
}

// TestJobAccounting: QueryInformationJobObject(JobObjectBasicAndIoAccountingInformation) gives a
// job's processor time and process counts (Wine 8: ERROR_INVALID_FUNCTION; winejob.c computes it
// from the job's live processes), and refuses a short buffer with ERROR_BAD_LENGTH.
func TestJobAccounting(t *testing.T) {
	job := newJob(t)
	var acct basicAndIOAccounting
	if err := windows.QueryInformationJobObject(job, classBasicAndIoAccounting, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		t.Fatalf("accounting of an empty job: %v", err)
	}
	if acct.BasicInfo.ActiveProcesses != 0 {
		t.Errorf("an empty job: %d active processes", acct.BasicInfo.ActiveProcesses)
	}
	if err := windows.QueryInformationJobObject(job, classBasicAndIoAccounting, uintptr(unsafe.Pointer(&acct)), 8, nil); !errors.Is(err, windows.ERROR_BAD_LENGTH) {
		t.Errorf("accounting into 8 bytes: %v, want ERROR_BAD_LENGTH", err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatalf("OpenProcess: %v", err)
	}
	defer windows.CloseHandle(p)
	if err := windows.AssignProcessToJobObject(job, p); err != nil {
		t.Fatalf("AssignProcessToJobObject: %v", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || len(line) < 5 || line[:5] != "ready" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	if err := windows.QueryInformationJobObject(job, classBasicAndIoAccounting, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		t.Fatalf("accounting of a job with a process: %v", err)
	}
	if acct.BasicInfo.ActiveProcesses != 1 || acct.BasicInfo.TotalProcesses < 1 || acct.BasicInfo.TotalUserTime <= 0 {
		t.Errorf("accounting of a job whose one process has used processor time: %+v", acct.BasicInfo)
	}

	if err := windows.QueryInformationJobObject(windows.CurrentProcess(), classBasicAndIoAccounting, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err == nil {
		t.Errorf("accounting of a process handle: no error")
	}
}

// TestJobCPURateControl: SetInformationJobObject(JobObjectCpuRateControlInformation) takes the
// documented values of JOBOBJECT_CPU_RATE_CONTROL_INFORMATION (a hard cap or rate of 1..10000,
// a weight of 1..9, 0 to turn control off) and refuses others with ERROR_INVALID_PARAMETER
// (Wine 8 refused all of them; winejob.c accepts the valid ones without enforcing them).
func TestJobCPURateControl(t *testing.T) {
	job := newJob(t)
	type rate struct{ flags, value uint32 }
	set := func(h windows.Handle, r rate) error {
		_, err := windows.SetInformationJobObject(h, classCPURateControl, uintptr(unsafe.Pointer(&r)), uint32(unsafe.Sizeof(r)))
		return err
	}
	for _, r := range []rate{{0x1 | 0x4, 5000}, {0x1 | 0x4, 10000}, {0x1 | 0x2, 1}, {0x1 | 0x2, 9}, {0x1, 2500}, {0, 0}} {
		if err := set(job, r); err != nil {
			t.Errorf("CPU rate control %+v: %v", r, err)
		}
	}
	for _, r := range []rate{{0x1 | 0x4, 0}, {0x1 | 0x4, 10001}, {0x1 | 0x2, 0}, {0x1 | 0x2, 10}, {0x4, 5000}, {0x1 | 0x2 | 0x4, 5}, {0x1 | 0x100, 5000}} {
		if err := set(job, r); !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			t.Errorf("CPU rate control %+v: %v, want ERROR_INVALID_PARAMETER", r, err)
		}
	}
	if err := set(windows.CurrentProcess(), rate{0x1 | 0x4, 5000}); err == nil {
		t.Errorf("CPU rate control of a process handle: no error")
	}
}

// spinner starts the spinning helper (spinHelperEnv=forever), in job if job is not 0, and
// answers a handle on it to read its times; it ends when the test does.
func spinner(t *testing.T, job windows.Handle) windows.Handle {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinHelperEnv+"=forever")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatalf("OpenProcess: %v", err)
	}
	t.Cleanup(func() { windows.CloseHandle(p) })
	if job != 0 {
		if err := windows.AssignProcessToJobObject(job, p); err != nil {
			t.Fatalf("AssignProcessToJobObject: %v", err)
		}
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || len(line) < 5 || line[:5] != "ready" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	return p
}

// cpuTime is a process's processor time (kernel and user).
func cpuTime(t *testing.T, p windows.Handle) time.Duration {
	t.Helper()
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(p, &created, &exited, &kernel, &user); err != nil {
		t.Fatalf("GetProcessTimes: %v", err)
	}
	ft := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ft(kernel) + ft(user)) * 100)
}

// TestJobCPUHardCap: a job's hard cap (JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, a share of all
// processors) is felt: a spinning process of a job capped at 1% uses about that share, while
// one outside the job uses what the machine gives it; with the cap off, or once the job's
// handle is closed, the capped process runs again. Under Wine, hack/wine/winejob.c's throttle
// enforces it by suspending the job's processes; its share is kept per 100-ms period, so the
// bound allows that much more. A figure of processor time over a wall-clock interval, compared
// with an uncapped process's over the same interval, not a timing expectation.
func TestJobCPUHardCap(t *testing.T) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		t.Fatalf("CreateJobObject: %v", err)
	}
	jobOpen := true
	t.Cleanup(func() {
		if jobOpen {
			windows.CloseHandle(job)
		}
	})
	capped := spinner(t, job)
	free := spinner(t, 0)
	type rate struct{ flags, value uint32 }
	set := func(r rate) {
		t.Helper()
		if _, err := windows.SetInformationJobObject(job, classCPURateControl, uintptr(unsafe.Pointer(&r)), uint32(unsafe.Sizeof(r))); err != nil {
			t.Fatalf("CPU rate control %+v: %v", r, err)
		}
	}
	set(rate{0x1 | 0x4, 100}) // enabled, hard cap, 1% of all processors
	procs := time.Duration(windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS))
	const interval = 4 * time.Second
	c0, f0 := cpuTime(t, capped), cpuTime(t, free)
	start := time.Now()
	time.Sleep(interval)
	wall := time.Since(start)
	c, f := cpuTime(t, capped)-c0, cpuTime(t, free)-f0
	share := wall * procs / 100
	bound := share + 2*100*time.Millisecond*procs // the throttle's period, twice
	t.Logf("over %s: capped at 1%% of %d processors %s (share %s), uncapped %s", wall, procs, c, share, f)
	if c > bound {
		t.Errorf("a process of a job capped at 1%% used %s of processor time in %s, more than %s", c, wall, bound)
	}
	if f < 3*bound {
		t.Fatalf("the uncapped process used only %s in %s: the machine is too busy to tell a cap from its load", f, wall)
	}

	// Off: the job's process runs again.
	set(rate{0, 0})
	c0 = cpuTime(t, capped)
	time.Sleep(time.Second)
	if got := cpuTime(t, capped) - c0; got <= bound/2 {
		t.Errorf("with the cap off, the process used %s in a second", got)
	}

	// Capped again, then the job's handle closed: the cap ends with it.
	set(rate{0x1 | 0x4, 100})
	time.Sleep(time.Second)
	windows.CloseHandle(job)
	jobOpen = false
	c0 = cpuTime(t, capped)
	time.Sleep(time.Second)
	if got := cpuTime(t, capped) - c0; got <= bound/2 {
		t.Errorf("after the capped job's handle was closed, the process used %s in a second", got)
	}
}

// TestProcessTimesOfAnother: GetProcessTimes of another process counts the processor time of
// all its threads, as on Windows. Wine 8 answered a small part of it (40 ms for 2 s of a
// spinning goroutine; hack/wine/winejob.c answers from SystemProcessInformation). The
// spinning process's time is compared with the wall-clock time it ran, not asserted as a
// figure: over a second it has used more than a tenth of it unless the machine starved it.
func TestProcessTimesOfAnother(t *testing.T) {
	p := spinner(t, 0)
	c0 := cpuTime(t, p)
	start := time.Now()
	time.Sleep(2 * time.Second)
	c, wall := cpuTime(t, p)-c0, time.Since(start)
	t.Logf("a spinning process: %s of processor time in %s", c, wall)
	if c < wall/10 {
		t.Errorf("GetProcessTimes of a spinning process: %s in %s, want most of it", c, wall)
	}
}

// weightedSpinner starts the spinning helper in job the shim's way (startInJob), with the
// creation flags flags, and answers a handle on it to read its times; it ends when the test
// does.
func weightedSpinner(t *testing.T, job windows.Handle, flags uint32) windows.Handle {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinHelperEnv+"=forever")
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: flags}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startInJob(t, job, cmd)
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	p, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatalf("OpenProcess: %v", err)
	}
	t.Cleanup(func() { windows.CloseHandle(p) })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || len(line) < 5 || line[:5] != "ready" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	return p
}

// TestJobCPUWeight: a job's CPU weight (JOB_OBJECT_CPU_RATE_CONTROL_WEIGHT_BASED, 1..9) sets its
// share of processor time against other work that wants it: with twice as many spinning
// processes as processors, those of a weight-9 job get more than twice the time of a weight-1
// job's. One of the light job's processes starts after its weight is set, the others before.
// Under Wine, hack/wine/winemem.c makes the weight the Linux nice value of the job's threads
// (an assumption for the figures: Windows documents the order, not the ratio). A comparison of
// processor time over the same interval, not a timing expectation. The processes start on the
// test's console and, as the shim starts a HostProcess container's, each on a console of its
// own (under Wine a new console is a new Linux session, and with the kernel's autogroup
// scheduling on, a thread's nice value orders it only within its session).
func TestJobCPUWeight(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags uint32
	}{{"test's console", 0}, {"new console", windows.CREATE_NEW_CONSOLE}} {
		t.Run(c.name, func(t *testing.T) { testJobCPUWeight(t, c.flags) })
	}
}

func testJobCPUWeight(t *testing.T, flags uint32) {
	procs := int(windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS))
	heavyJob, lightJob := newJob(t), newJob(t)
	type rate struct{ flags, value uint32 }
	set := func(job windows.Handle, r rate) {
		t.Helper()
		if _, err := windows.SetInformationJobObject(job, classCPURateControl, uintptr(unsafe.Pointer(&r)), uint32(unsafe.Sizeof(r))); err != nil {
			t.Fatalf("CPU rate control %+v: %v", r, err)
		}
	}
	var heavy, light []windows.Handle
	for i := 0; i < procs; i++ {
		heavy = append(heavy, weightedSpinner(t, heavyJob, flags))
	}
	for i := 0; i < procs-1; i++ {
		light = append(light, weightedSpinner(t, lightJob, flags))
	}
	set(heavyJob, rate{0x1 | 0x2, 9})
	set(lightJob, rate{0x1 | 0x2, 1})
	light = append(light, weightedSpinner(t, lightJob, flags))

	sum := func(ps []windows.Handle) time.Duration {
		var d time.Duration
		for _, p := range ps {
			d += cpuTime(t, p)
		}
		return d
	}
	const interval = 3 * time.Second
	h0, l0 := sum(heavy), sum(light)
	time.Sleep(interval)
	h, l := sum(heavy)-h0, sum(light)-l0
	t.Logf("over %s with %d processors: %d processes of a weight-9 job used %s, %d of a weight-1 job %s", interval, procs, len(heavy), h, len(light), l)
	if h <= 2*l {
		t.Errorf("a weight-9 job's processes used %s, a weight-1 job's %s: want more than twice", h, l)
	}

	// Weights off: the light job's processes get their share back.
	set(lightJob, rate{0, 0})
	set(heavyJob, rate{0, 0})
	h0, l0 = sum(heavy), sum(light)
	time.Sleep(interval)
	h, l = sum(heavy)-h0, sum(light)-l0
	t.Logf("weights off: %s and %s", h, l)
	if l <= h/4 {
		t.Errorf("with the weights off, the light job's processes used %s, the heavy's %s: want about even", l, h)
	}
}
