package wintest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// A job's memory limits (JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_PROCESS_MEMORY), which
// Wine 8 accepts and neither keeps nor enforces and hack/wine/winemem.c fills in. The tests hold
// for Windows too.

// memHelperEnv makes the test binary a helper of TestJobMemoryLimit:
//   - "fill": commit 1 MiB at a time (VirtualAlloc, MEM_RESERVE|MEM_COMMIT) up to fillCapMiB,
//     release it all, commit 8 MiB again, and only then print "got N err E" (E the error of the
//     commit that failed, 0 if none) and "again E";
//   - "hold:N": commit N MiB, then run a "fill" child (in the job by inheritance) and print its
//     output. While the child fills the job, this process can commit nothing either (the limit
//     is the job's), so it has its output buffer ready before.
const memHelperEnv = "RUNHCS_WINTEST_MEM_HELPER"

const fillCapMiB = 160

func memHelper(mode string) int {
	if n, ok := strings.CutPrefix(mode, "hold:"); ok {
		mib, _ := strconv.Atoi(n)
		if _, err := commitMiB(mib); err != nil {
			fmt.Println("hold:", err)
			return 1
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), memHelperEnv+"=fill")
		var out bytes.Buffer
		out.Grow(64 << 10)
		cmd.Stdout = &out
		err := cmd.Run()
		fmt.Print(out.String())
		if err != nil {
			fmt.Println("fill child:", err)
			return 1
		}
		return 0
	}
	// Nothing of the Go heap is allocated from the first commit to the release: when the job is
	// full, the runtime's own next commit would fail too ("fatal error: out of memory"), as it
	// would on Windows. So the slice is made first, and VirtualAlloc is called raw (its error
	// as an interface would be an allocation).
	kernel32 := windows.NewLazySystemDLL("kernel32.dll")
	virtualAlloc, virtualFree := kernel32.NewProc("VirtualAlloc"), kernel32.NewProc("VirtualFree")
	if err := errors.Join(virtualAlloc.Find(), virtualFree.Find()); err != nil {
		fmt.Println(err)
		return 1
	}
	regions := make([]uintptr, 0, fillCapMiB)
	var errno syscall.Errno
	for len(regions) < fillCapMiB {
		a, _, e := syscall.SyscallN(virtualAlloc.Addr(), 0, 1<<20, windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
		if a == 0 {
			errno = e
			break
		}
		regions = append(regions, a)
	}
	freed := true
	for _, a := range regions {
		if ok, _, _ := syscall.SyscallN(virtualFree.Addr(), a, 0, windows.MEM_RELEASE); ok == 0 {
			freed = false
		}
	}
	code, got := int(errno), len(regions)
	if !freed {
		fmt.Println("VirtualFree failed")
		return 1
	}
	_, err := commitMiB(8)
	again := 0
	if errors.As(err, &errno) {
		again = int(errno)
	}
	fmt.Printf("got %d err %d\nagain %d\n", got, code, again)
	return 0
}

// commitMiB commits mib MiB in one region (the commit is what a job's limit counts, touched or
// not).
func commitMiB(mib int) (uintptr, error) {
	return windows.VirtualAlloc(0, uintptr(mib)<<20, windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
}

// memJob makes a job with extended limits flags (KILL_ON_JOB_CLOSE added) and the process and
// job memory limits in MiB.
func memJob(t *testing.T, flags uint32, processMiB, jobMiB int) windows.Handle {
	t.Helper()
	job := newJob(t)
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	ext.BasicLimitInformation.LimitFlags = flags | windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	ext.ProcessMemoryLimit = uintptr(processMiB) << 20
	ext.JobMemoryLimit = uintptr(jobMiB) << 20
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext))); err != nil {
		t.Fatalf("SetInformationJobObject(JobObjectExtendedLimitInformation): %v", err)
	}
	return job
}

func queryLimits(t *testing.T, job windows.Handle) windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION {
	t.Helper()
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err != nil {
		t.Fatalf("QueryInformationJobObject(JobObjectExtendedLimitInformation): %v", err)
	}
	return ext
}

// startInJob starts the test binary as a helper with env in job, as the shim starts a
// HostProcess container's process: created suspended, assigned, then resumed, so that none of
// it runs outside the job. The caller may set other creation flags in cmd.SysProcAttr, and
// waits for cmd.
func startInJob(t *testing.T, job windows.Handle, cmd *exec.Cmd) {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf(format, args...)
	}
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_SUSPEND_RESUME|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(cmd.Process.Pid))
	if err != nil {
		fail("OpenProcess: %v", err)
	}
	defer windows.CloseHandle(p)
	if err := windows.AssignProcessToJobObject(job, p); err != nil {
		fail("AssignProcessToJobObject: %v", err)
	}
	if r, _, _ := windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess").Call(uintptr(p)); r != 0 {
		fail("NtResumeProcess: %#x", r)
	}
}

// runInJob runs the memory helper in mode in job (startInJob) and answers its output lines.
func runInJob(t *testing.T, job windows.Handle, mode string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memHelperEnv+"="+mode)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	startInJob(t, job, cmd)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper %s: %v; output:\n%s", mode, err, out.String())
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// parseFill reads a fill helper's "got N err E" and "again E".
func parseFill(t *testing.T, lines []string) (got, code, again int) {
	t.Helper()
	for _, l := range lines {
		if _, err := fmt.Sscanf(l, "got %d err %d", &got, &code); err == nil {
			continue
		}
		if _, err := fmt.Sscanf(l, "again %d", &again); err == nil {
			return got, code, again
		}
	}
	t.Fatalf("fill helper output %q: want \"got N err E\" and \"again E\"", lines)
	return
}

// TestJobMemoryLimit: a job's memory limits are felt and queried as Windows keeps them.
//   - A query answers the limits as set (Wine 8 answered LimitFlags 0, JobMemoryLimit 0).
//   - A process of a job limited to 96 MiB commits less than 96 MiB in all: the commit that
//     would pass the limit fails with ERROR_COMMITMENT_LIMIT (1455); once it releases its
//     memory it can commit again; the job's peak is what it used (Wine 8: it committed 160).
//   - The limit is the job's: a child of a job process that holds 40 MiB commits less than
//     the 56 MiB left (job inheritance), and a per-process limit of 48 MiB stops a process
//     below 48 MiB.
//   - A job without a memory limit lets its process commit all 160 MiB (the control).
func TestJobMemoryLimit(t *testing.T) {
	const errCommitmentLimit = 1455 // ERROR_COMMITMENT_LIMIT

	t.Run("job", func(t *testing.T) {
		job := memJob(t, windows.JOB_OBJECT_LIMIT_JOB_MEMORY, 0, 96)
		ext := queryLimits(t, job)
		if ext.BasicLimitInformation.LimitFlags&windows.JOB_OBJECT_LIMIT_JOB_MEMORY == 0 || ext.JobMemoryLimit != 96<<20 {
			t.Errorf("limits as queried: LimitFlags %#x JobMemoryLimit %d; want JOB_MEMORY and %d", ext.BasicLimitInformation.LimitFlags, ext.JobMemoryLimit, 96<<20)
		}
		got, code, again := parseFill(t, runInJob(t, job, "fill"))
		t.Logf("a process of a 96-MiB job committed %d MiB, then error %d", got, code)
		if code != errCommitmentLimit || got >= 96 || got == 0 {
			t.Errorf("fill in a 96-MiB job: %d MiB, then error %d; want fewer than 96 MiB, then %d", got, code, errCommitmentLimit)
		}
		if again != 0 {
			t.Errorf("commit 8 MiB after releasing the fill: error %d; want it to succeed", again)
		}
		ext = queryLimits(t, job)
		if ext.PeakJobMemoryUsed < uintptr(got)<<20 || ext.PeakJobMemoryUsed > 96<<20 || ext.PeakProcessMemoryUsed < uintptr(got)<<20 {
			t.Errorf("peaks after a fill of %d MiB: job %d, process %d bytes; want at least the fill and at most the limit", got, ext.PeakJobMemoryUsed, ext.PeakProcessMemoryUsed)
		}

		got, code, _ = parseFill(t, runInJob(t, job, "hold:40"))
		t.Logf("a child of a process holding 40 MiB in the job committed %d MiB, then error %d", got, code)
		if code != errCommitmentLimit || got+40 >= 96 {
			t.Errorf("fill in a child of a process holding 40 MiB of a 96-MiB job: %d MiB, then error %d; want fewer than 56 MiB, then %d", got, code, errCommitmentLimit)
		}
	})

	t.Run("process", func(t *testing.T) {
		job := memJob(t, windows.JOB_OBJECT_LIMIT_PROCESS_MEMORY, 48, 0)
		if ext := queryLimits(t, job); ext.ProcessMemoryLimit != 48<<20 {
			t.Errorf("ProcessMemoryLimit as queried: %d; want %d", ext.ProcessMemoryLimit, 48<<20)
		}
		got, code, _ := parseFill(t, runInJob(t, job, "fill"))
		if code != errCommitmentLimit || got >= 48 {
			t.Errorf("fill with a per-process limit of 48 MiB: %d MiB, then error %d; want fewer than 48 MiB, then %d", got, code, errCommitmentLimit)
		}
	})

	t.Run("unlimited", func(t *testing.T) {
		job := memJob(t, 0, 0, 0)
		got, code, _ := parseFill(t, runInJob(t, job, "fill"))
		if code != 0 || got != fillCapMiB {
			t.Errorf("fill in a job without a memory limit: %d MiB, then error %d; want all %d", got, code, fillCapMiB)
		}
	})
}
