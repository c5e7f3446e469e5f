package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Job object information classes and flags (winnt.h; SetInformationJobObject,
// QueryInformationJobObject).
const (
	jobObjectBasicProcessIDList               = 3
	jobObjectBasicAndIoAccountingInformation  = 8
	jobObjectCPURateControlInformation        = 15
	jobObjectCPURateControlEnable             = 0x1
	jobObjectCPURateControlWeightBased        = 0x2
	jobObjectCPURateControlHardCap            = 0x4
	jobObjectQuery                            = 0x0004 // JOB_OBJECT_QUERY
	jobObjectTerminate                        = 0x0008 // JOB_OBJECT_TERMINATE
	exitCodeTerminated                        = 1      // what hcsshim terminates a job with
	processQueryLimitedInformationAndReadVMem = windows.PROCESS_QUERY_LIMITED_INFORMATION | windows.PROCESS_VM_READ
)

// jobCPURateControl is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION (its union as one DWORD).
type jobCPURateControl struct {
	ControlFlags uint32
	Value        uint32
}

// ioCounters and jobBasicAndIOAccounting are IO_COUNTERS and
// JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION.
type ioCounters struct {
	ReadOperationCount, WriteOperationCount, OtherOperationCount uint64
	ReadTransferCount, WriteTransferCount, OtherTransferCount    uint64
}

type jobBasicAndIOAccounting struct {
	TotalUserTime, TotalKernelTime                                                 int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime                             int64
	TotalPageFaultCount, TotalProcesses, ActiveProcesses, TotalTerminatedProcesses uint32
	IO                                                                             ioCounters
}

// processMemoryCountersEx2 is PROCESS_MEMORY_COUNTERS_EX2 (Windows 10 1809 and later).
type processMemoryCountersEx2 struct {
	Cb                         uint32
	PageFaultCount             uint32
	PeakWorkingSetSize         uintptr
	WorkingSetSize             uintptr
	QuotaPeakPagedPoolUsage    uintptr
	QuotaPagedPoolUsage        uintptr
	QuotaPeakNonPagedPoolUsage uintptr
	QuotaNonPagedPoolUsage     uintptr
	PagefileUsage              uintptr
	PeakPagefileUsage          uintptr
	PrivateUsage               uintptr
	PrivateWorkingSetSize      uintptr
	SharedCommitUsage          uint64
}

type winJob struct {
	id     string
	mu     sync.Mutex // guards h, cpuSet
	h      windows.Handle
	cpuSet bool // CPU rate control was enabled, so removing a CPU limit must disable it
}

// CreateJob creates the named job object with its processes ended by the last handle's close
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, as hcsshim sets it) and applies limits.
func (winHost) CreateJob(ctx context.Context, id string, limits Limits) (_ Job, retErr error) {
	h, err := windows.CreateJobObject(nil, windows.StringToUTF16Ptr(JobName(id)))
	if err != nil {
		return nil, fmt.Errorf("create job object %s: %w", JobName(id), err)
	}
	if windows.GetLastError() == windows.ERROR_ALREADY_EXISTS {
		_ = windows.CloseHandle(h)
		return nil, fmt.Errorf("create job object %s: it already exists: %w", JobName(id), windows.ERROR_ALREADY_EXISTS)
	}
	j := &winJob{id: id, h: h}
	defer func() {
		if retErr != nil {
			_ = windows.TerminateJobObject(h, exitCodeTerminated)
			_ = windows.CloseHandle(h)
		}
	}()
	if err := j.SetLimits(ctx, limits); err != nil {
		return nil, err
	}
	return j, nil
}

// TerminateJob opens the job of container id by name and terminates it; no such job is done.
func (winHost) TerminateJob(_ context.Context, id string) error {
	h, err := openJobObject(jobObjectTerminate, false, windows.StringToUTF16Ptr(JobName(id)))
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
			return nil
		}
		return fmt.Errorf("open job object %s: %w", JobName(id), err)
	}
	defer windows.CloseHandle(h)
	if err := windows.TerminateJobObject(h, exitCodeTerminated); err != nil {
		return fmt.Errorf("terminate job object %s: %w", JobName(id), err)
	}
	return nil
}

func (j *winJob) handle() (windows.Handle, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.h == 0 {
		return 0, fmt.Errorf("job object %s: closed: %w", JobName(j.id), windows.ERROR_INVALID_HANDLE)
	}
	return j.h, nil
}

// SetLimits sets the memory limit and the CPU rate control; zero members clear them. A CPU
// count becomes a hard cap of count/host processors, as hcsshim converts it
// (jobcontainers/oci.go: calculateJobCPURate), a weight of 1..10000 the job weight 1..9
// (calculateJobCPUWeight).
func (j *winJob) SetLimits(_ context.Context, l Limits) error {
	h, err := j.handle()
	if err != nil {
		return err
	}
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(h, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err != nil {
		return fmt.Errorf("query limits of job object %s: %w", JobName(j.id), err)
	}
	ext.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	ext.BasicLimitInformation.LimitFlags &^= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
	ext.JobMemoryLimit = 0
	if l.MemoryBytes > 0 {
		ext.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		ext.JobMemoryLimit = uintptr(l.MemoryBytes)
	}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext))); err != nil {
		return fmt.Errorf("set the memory limit of job object %s to %d bytes: %w", JobName(j.id), l.MemoryBytes, err)
	}
	var cpu jobCPURateControl
	procs := windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS)
	switch {
	case l.CPUCount > 0:
		cpu = jobCPURateControl{jobObjectCPURateControlEnable | jobObjectCPURateControlHardCap, CPURate(l.CPUCount, procs)}
	case l.CPUMaximum > 0:
		cpu = jobCPURateControl{jobObjectCPURateControlEnable | jobObjectCPURateControlHardCap, l.CPUMaximum}
	case l.CPUWeight > 0:
		cpu = jobCPURateControl{jobObjectCPURateControlEnable | jobObjectCPURateControlWeightBased, CPUWeight(l.CPUWeight)}
	}
	j.mu.Lock()
	wasSet := j.cpuSet
	j.mu.Unlock()
	if cpu.ControlFlags == 0 && !wasSet {
		return nil // never enabled: nothing to remove
	}
	if _, err := windows.SetInformationJobObject(h, jobObjectCPURateControlInformation, uintptr(unsafe.Pointer(&cpu)), uint32(unsafe.Sizeof(cpu))); err != nil {
		return fmt.Errorf("set the CPU rate control of job object %s to %+v: %w", JobName(j.id), cpu, err)
	}
	j.mu.Lock()
	j.cpuSet = cpu.ControlFlags != 0
	j.mu.Unlock()
	return nil
}

// Pids lists the job's processes (JobObjectBasicProcessIdList).
func (j *winJob) Pids(context.Context) ([]uint32, error) {
	h, err := j.handle()
	if err != nil {
		return nil, err
	}
	for n := 64; ; n *= 4 {
		// JOBOBJECT_BASIC_PROCESS_ID_LIST: two DWORDs, then ULONG_PTRs.
		buf := make([]uintptr, 1+n)
		err := windows.QueryInformationJobObject(h, jobObjectBasicProcessIDList, uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf))*uint32(unsafe.Sizeof(buf[0])), nil)
		if errors.Is(err, windows.ERROR_MORE_DATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list the processes of job object %s: %w", JobName(j.id), err)
		}
		hdr := (*[2]uint32)(unsafe.Pointer(&buf[0]))
		out := make([]uint32, 0, hdr[1])
		for _, pid := range buf[1 : 1+int(hdr[1])] {
			out = append(out, uint32(pid))
		}
		return out, nil
	}
}

// Stats reads the job's accounting: processor times and I/O
// (JobObjectBasicAndIoAccountingInformation), peak commit (PeakJobMemoryUsed), and the
// current commit and private working set summed over its processes (GetProcessMemoryInfo).
func (j *winJob) Stats(ctx context.Context) (*schema2.Statistics, error) {
	h, err := j.handle()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var acct jobBasicAndIOAccounting
	if err := windows.QueryInformationJobObject(h, jobObjectBasicAndIoAccountingInformation, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		return nil, fmt.Errorf("accounting of job object %s: %w", JobName(j.id), err)
	}
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(h, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err != nil {
		return nil, fmt.Errorf("memory of job object %s: %w", JobName(j.id), err)
	}
	pids, err := j.Pids(ctx)
	if err != nil {
		return nil, err
	}
	var commit, privateWS uint64
	for _, pid := range pids {
		ph, err := windows.OpenProcess(processQueryLimitedInformationAndReadVMem, false, pid)
		if err != nil {
			continue // exited meanwhile
		}
		var mc processMemoryCountersEx2
		if getProcessMemoryInfo(ph, &mc, uint32(unsafe.Sizeof(mc))) == nil {
			commit += uint64(mc.PrivateUsage)
			privateWS += uint64(mc.PrivateWorkingSetSize)
		}
		_ = windows.CloseHandle(ph)
	}
	return &schema2.Statistics{
		Timestamp: now,
		Processor: &schema2.ProcessorStats{
			TotalRuntime100ns:  uint64(acct.TotalUserTime + acct.TotalKernelTime),
			RuntimeUser100ns:   uint64(acct.TotalUserTime),
			RuntimeKernel100ns: uint64(acct.TotalKernelTime),
		},
		Memory: &schema2.MemoryStats{
			MemoryUsageCommitBytes:            commit,
			MemoryUsageCommitPeakBytes:        uint64(ext.PeakJobMemoryUsed),
			MemoryUsagePrivateWorkingSetBytes: privateWS,
		},
		Storage: &schema2.StorageStats{
			ReadCountNormalized:  acct.IO.ReadOperationCount,
			ReadSizeBytes:        acct.IO.ReadTransferCount,
			WriteCountNormalized: acct.IO.WriteOperationCount,
			WriteSizeBytes:       acct.IO.WriteTransferCount,
		},
	}, nil
}

// Terminate ends every process in the job (TerminateJobObject).
func (j *winJob) Terminate(context.Context) error {
	h, err := j.handle()
	if err != nil {
		return err
	}
	if err := windows.TerminateJobObject(h, exitCodeTerminated); err != nil {
		return fmt.Errorf("terminate job object %s: %w", JobName(j.id), err)
	}
	return nil
}

// Close closes the handle; the last one ends the job's processes.
func (j *winJob) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.h == 0 {
		return nil
	}
	err := windows.CloseHandle(j.h)
	j.h = 0
	return err
}
