/*
 * winejob.c: the two job object information classes a HostProcess container's job needs
 * (docs/hostprocess.md) and Wine 8 lacks. Installed by winecompat_install (winecompat.c) under
 * Wine only, in place of kernel32's exports QueryInformationJobObject and
 * SetInformationJobObject; every other class goes to Wine's own functions unchanged.
 *
 * Observed under Wine 8.0 (Debian 12; docs/notes/hostprocess.md §6):
 * - QueryInformationJobObject(JobObjectBasicAndIoAccountingInformation) fails with
 *   ERROR_INVALID_FUNCTION (ntdll answers STATUS_NOT_IMPLEMENTED);
 * - SetInformationJobObject(JobObjectCpuRateControlInformation) fails with
 *   ERROR_INVALID_PARAMETER for every value, even ControlFlags 0 (the shim sets a weight for a
 *   HostProcess pod's sandbox, so RunPodSandbox failed on the emulated node).
 *
 * What Windows does, and what this reproduces:
 * - JobObjectBasicAndIoAccountingInformation (class 8) is JOBOBJECT_BASIC_AND_IO_ACCOUNTING_
 *   INFORMATION: the job's processor times, page faults and process counts, then IO_COUNTERS
 *   (documented, "JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION structure"). Here it is computed
 *   from the job's live processes (JobObjectBasicProcessIdList, which Wine has) with
 *   GetProcessTimes and GetProcessIoCounters. Deviation: Windows also counts the times and I/O
 *   of processes of the job that have ended, and TotalProcesses counts every process ever
 *   assigned; here both cover only the processes alive at the call (TotalTerminatedProcesses is
 *   0, TotalPageFaultCount 0, the period times equal the totals). A buffer smaller than the
 *   structure fails with ERROR_BAD_LENGTH, as Windows.
 * - JobObjectCpuRateControlInformation (class 15) takes JOBOBJECT_CPU_RATE_CONTROL_INFORMATION:
 *   ControlFlags 0 turns control off; otherwise JOB_OBJECT_CPU_RATE_CONTROL_ENABLE with one of
 *   WEIGHT_BASED (Weight 1..9), HARD_CAP or neither (CpuRate 1..10000), or MIN_MAX_RATE
 *   (MinRate <= MaxRate <= 10000), NOTIFY allowed with a rate; anything else is
 *   ERROR_INVALID_PARAMETER (documented constraints of the structure). Wine has no CPU rate
 *   control. A hard cap (HARD_CAP's CpuRate, MIN_MAX_RATE's MaxRate: "the job's CPU usage is
 *   limited to this rate", a share of all the host's processors in 1/10000ths per scheduling
 *   interval) is enforced here by a throttle thread in the calling process: every 100 ms it
 *   adds up the processor time of the job's live processes and, once they have used more than
 *   their share since the cap was set, suspends them (NtSuspendProcess) until the share has
 *   caught up, then resumes them. DEVIATIONS: the share is kept over 100-ms periods, where
 *   Windows' scheduler keeps it per scheduling interval; processes that ended are not counted;
 *   the throttle lives in the process that set the cap and ends with it, or when it closes
 *   its job handle (CloseHandle is patched for that; a duplicate of the handle keeps no cap),
 *   or when the cap is set off. A weight is enforced by winemem.c (the Linux nice value of the
 *   job's threads). A rate without HARD_CAP (a soft target that lets the job use idle
 *   processors) is accepted and not enforced. The value is not kept for queries: a query of
 *   class 15 still gets Wine's answer.
 * - JobObjectExtendedLimitInformation (class 9): Wine 8 accepts it and keeps no memory limit
 *   (a query answers LimitFlags 0). It is set with Wine's own function (which keeps
 *   KILL_ON_JOB_CLOSE), then kept in winemem.c's table, which enforces the memory limits; a
 *   query of class 9 (or 2, the basic part) through the handle that set it answers the values
 *   as set, with the peaks. A buffer of another size is ERROR_BAD_LENGTH, as Windows.
 *   AssignProcessToJobObject is patched so that the table knows the job's processes.
 * Both check the handle first with a query Wine does answer (JobObjectBasicAccountingInformation),
 * so a handle that is no job fails as Wine fails it (ERROR_INVALID_HANDLE).
 * - GetProcessTimes of another process answers the times of all its threads (documented:
 *   "GetProcessTimes function"). Wine 8 answers much less: observed 2026-11-27, a Go process
 *   spinning on a thread other than its first for 2 s reported 40 ms through GetProcessTimes,
 *   and 1.94 s through NtQuerySystemInformation(SystemProcessInformation), whose process and
 *   per-thread times agree with each other and with Linux's (ps). So the kernel and user times
 *   of another process come from SystemProcessInformation here, for GetProcessTimes (kernel32's
 *   export is replaced) and for the job's accounting and throttle above; the creation and exit
 *   times stay Wine's.
 *
 * Go programs find both with GetProcAddress (golang.org/x/sys/windows' lazy kernel32 procs).
 * Tested in internal/wintest, TestJobAccounting, TestJobCPURateControl, TestJobCPUHardCap,
 * TestJobCPUWeight, TestJobMemoryLimit and
 * TestProcessTimesOfAnother.
 */
#include <windows.h>

#include "winecompat.h"

#define CLASS_BASIC_ACCOUNTING 1
#define CLASS_BASIC_LIMIT 2
#define CLASS_EXTENDED_LIMIT 9
#define CLASS_PROCESS_ID_LIST 3
#define CLASS_BASIC_AND_IO_ACCOUNTING 8
#define CLASS_CPU_RATE_CONTROL 15

#define CPU_ENABLE 0x1
#define CPU_WEIGHT_BASED 0x2
#define CPU_HARD_CAP 0x4
#define CPU_NOTIFY 0x8
#define CPU_MIN_MAX_RATE 0x10

typedef BOOL(WINAPI *query_job_fn)(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len, LPDWORD ret);
typedef BOOL(WINAPI *set_job_fn)(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len);

static query_job_fn real_query;
static set_job_fn real_set;

/* job_pids lists the job's live process ids into a buffer it allocates (HeapFree it). */
static JOBOBJECT_BASIC_PROCESS_ID_LIST *job_pids(HANDLE job)
{
	DWORD cap = 64;

	for (;;) {
		DWORD size = sizeof(JOBOBJECT_BASIC_PROCESS_ID_LIST) + cap * sizeof(ULONG_PTR);
		JOBOBJECT_BASIC_PROCESS_ID_LIST *l = HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, size);

		if (l == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return NULL;
		}
		if (real_query(job, (JOBOBJECTINFOCLASS)CLASS_PROCESS_ID_LIST, l, size, NULL))
			return l;
		if (GetLastError() != ERROR_MORE_DATA || cap >= 65536) {
			DWORD err = GetLastError();

			HeapFree(GetProcessHeap(), 0, l);
			SetLastError(err);
			return NULL;
		}
		cap = l->NumberOfAssignedProcesses > cap ? l->NumberOfAssignedProcesses + 16 : cap * 2;
		HeapFree(GetProcessHeap(), 0, l);
	}
}

static ULONGLONG ft64(FILETIME f)
{
	return ((ULONGLONG)f.dwHighDateTime << 32) | f.dwLowDateTime;
}

/* The head of winternl.h's SYSTEM_PROCESS_INFORMATION, up to the times and the process id. */
struct process_entry {
	ULONG next;    /* NextEntryOffset */
	ULONG threads; /* NumberOfThreads */
	BYTE reserved[24]; /* WorkingSetPrivateSize, HardFaultCount, NumberOfThreadsHighWatermark, CycleTime */
	LARGE_INTEGER create, user, kernel;
	USHORT name_len, name_max;
	PWSTR name;
	LONG base_priority;
	HANDLE pid;
};

typedef LONG(NTAPI *query_system_fn)(ULONG cls, PVOID info, ULONG len, PULONG ret);

static query_system_fn query_system;

#define SYSTEM_PROCESS_INFORMATION_ 5
#define STATUS_INFO_LENGTH_MISMATCH_ ((LONG)0xC0000004)

/* processes_snapshot answers SystemProcessInformation in a buffer it allocates (HeapFree it). */
static BYTE *processes_snapshot(void)
{
	ULONG size = 256 * 1024;

	while (query_system != NULL && size <= 64 * 1024 * 1024) {
		BYTE *b = HeapAlloc(GetProcessHeap(), 0, size);
		ULONG ret = 0;
		LONG st;

		if (b == NULL)
			return NULL;
		st = query_system(SYSTEM_PROCESS_INFORMATION_, b, size, &ret);
		if (st >= 0)
			return b;
		HeapFree(GetProcessHeap(), 0, b);
		if (st != STATUS_INFO_LENGTH_MISMATCH_)
			return NULL;
		size = ret > size ? ret + 64 * 1024 : size * 2;
	}
	return NULL;
}

/* snapshot_times finds pid in snap: its kernel and user times, 100 ns. */
static BOOL snapshot_times(const BYTE *snap, DWORD pid, ULONGLONG *kernel, ULONGLONG *user)
{
	const BYTE *p = snap;

	for (;;) {
		const struct process_entry *e = (const struct process_entry *)p;

		if ((DWORD)(ULONG_PTR)e->pid == pid) {
			*kernel = (ULONGLONG)e->kernel.QuadPart;
			*user = (ULONGLONG)e->user.QuadPart;
			return TRUE;
		}
		if (e->next == 0)
			return FALSE;
		p += e->next;
	}
}

typedef BOOL(WINAPI *get_process_times_fn)(HANDLE p, LPFILETIME created, LPFILETIME exited, LPFILETIME kernel,
					    LPFILETIME user);

static get_process_times_fn real_get_process_times;

static FILETIME to_ft(ULONGLONG v)
{
	FILETIME f;

	f.dwLowDateTime = (DWORD)v;
	f.dwHighDateTime = (DWORD)(v >> 32);
	return f;
}

static BOOL WINAPI compat_get_process_times(HANDLE p, LPFILETIME created, LPFILETIME exited, LPFILETIME kernel,
					    LPFILETIME user)
{
	DWORD pid;
	BYTE *snap;
	ULONGLONG k, u;

	if (!real_get_process_times(p, created, exited, kernel, user))
		return FALSE;
	pid = GetProcessId(p);
	if (pid == 0 || pid == GetCurrentProcessId() || (snap = processes_snapshot()) == NULL)
		return TRUE;
	if (snapshot_times(snap, pid, &k, &u)) {
		*kernel = to_ft(k);
		*user = to_ft(u);
	}
	HeapFree(GetProcessHeap(), 0, snap);
	return TRUE;
}

static BOOL basic_and_io(HANDLE job, JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION *out, DWORD len, LPDWORD ret)
{
	JOBOBJECT_BASIC_ACCOUNTING_INFORMATION check;
	JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION a;
	JOBOBJECT_BASIC_PROCESS_ID_LIST *l;
	BYTE *snap;
	ULONGLONG k, u;
	DWORD i;

	if (!real_query(job, (JOBOBJECTINFOCLASS)CLASS_BASIC_ACCOUNTING, &check, sizeof(check), NULL))
		return FALSE;
	if (len < sizeof(a)) {
		SetLastError(ERROR_BAD_LENGTH);
		return FALSE;
	}
	l = job_pids(job);
	if (l == NULL)
		return FALSE;
	snap = processes_snapshot();
	ZeroMemory(&a, sizeof(a));
	for (i = 0; i < l->NumberOfProcessIdsInList; i++) {
		HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)l->ProcessIdList[i]);
		FILETIME created, exited, kernel, user;
		IO_COUNTERS io;

		if (p == NULL)
			continue; /* ended since the list was taken */
		a.BasicInfo.TotalProcesses++;
		a.BasicInfo.ActiveProcesses++;
		if (snap != NULL && snapshot_times(snap, (DWORD)l->ProcessIdList[i], &k, &u)) {
			a.BasicInfo.TotalKernelTime.QuadPart += k;
			a.BasicInfo.TotalUserTime.QuadPart += u;
		} else if (GetProcessTimes(p, &created, &exited, &kernel, &user)) {
			a.BasicInfo.TotalKernelTime.QuadPart += ft64(kernel);
			a.BasicInfo.TotalUserTime.QuadPart += ft64(user);
		}
		if (GetProcessIoCounters(p, &io)) {
			a.IoInfo.ReadOperationCount += io.ReadOperationCount;
			a.IoInfo.WriteOperationCount += io.WriteOperationCount;
			a.IoInfo.OtherOperationCount += io.OtherOperationCount;
			a.IoInfo.ReadTransferCount += io.ReadTransferCount;
			a.IoInfo.WriteTransferCount += io.WriteTransferCount;
			a.IoInfo.OtherTransferCount += io.OtherTransferCount;
		}
		CloseHandle(p);
	}
	HeapFree(GetProcessHeap(), 0, l);
	if (snap != NULL)
		HeapFree(GetProcessHeap(), 0, snap);
	a.BasicInfo.ThisPeriodTotalKernelTime = a.BasicInfo.TotalKernelTime;
	a.BasicInfo.ThisPeriodTotalUserTime = a.BasicInfo.TotalUserTime;
	CopyMemory(out, &a, sizeof(a));
	if (ret != NULL)
		*ret = sizeof(a);
	return TRUE;
}

static BOOL WINAPI compat_query(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len, LPDWORD ret)
{
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION ext;

	if ((DWORD)cls == CLASS_BASIC_AND_IO_ACCOUNTING && !real_query(job, cls, info, len, ret) &&
	    GetLastError() == ERROR_INVALID_FUNCTION)
		return basic_and_io(job, info, len, ret);
	if (!real_query(job, cls, info, len, ret))
		return FALSE;
	/* The limits as set, which Wine 8 does not keep (winemem.c). */
	if ((DWORD)cls == CLASS_EXTENDED_LIMIT && len >= sizeof(ext)) {
		CopyMemory(&ext, info, sizeof(ext));
		if (winemem_query_limits(job, &ext))
			CopyMemory(info, &ext, sizeof(ext));
	} else if ((DWORD)cls == CLASS_BASIC_LIMIT && len >= sizeof(ext.BasicLimitInformation)) {
		ZeroMemory(&ext, sizeof(ext));
		if (winemem_query_limits(job, &ext))
			CopyMemory(info, &ext.BasicLimitInformation, sizeof(ext.BasicLimitInformation));
	}
	return TRUE;
}

/* cpu_rate_valid: the documented constraints of JOBOBJECT_CPU_RATE_CONTROL_INFORMATION. */
static BOOL cpu_rate_valid(DWORD flags, DWORD value)
{
	DWORD kind = flags & (CPU_WEIGHT_BASED | CPU_HARD_CAP | CPU_MIN_MAX_RATE);

	if (flags == 0)
		return TRUE;
	if ((flags & ~(CPU_ENABLE | CPU_WEIGHT_BASED | CPU_HARD_CAP | CPU_NOTIFY | CPU_MIN_MAX_RATE)) != 0 ||
	    !(flags & CPU_ENABLE))
		return FALSE;
	switch (kind) {
	case CPU_WEIGHT_BASED:
		return !(flags & CPU_NOTIFY) && value >= 1 && value <= 9;
	case 0:
	case CPU_HARD_CAP:
		return value >= 1 && value <= 10000;
	case CPU_MIN_MAX_RATE:
		return !(flags & CPU_NOTIFY) && LOWORD(value) <= HIWORD(value) && HIWORD(value) <= 10000 &&
		       HIWORD(value) >= 1;
	default:
		return FALSE; /* more than one kind */
	}
}

/* ---- the hard cap's throttle */

#define CAP_PERIOD_MS 100
#define MAX_CAPS 32
#define MAX_SUSPENDED 128

typedef LONG(NTAPI *nt_process_fn)(HANDLE process);

struct cap {
	HANDLE job;	     /* the caller's handle; NULL: a free slot */
	DWORD rate;	     /* 1/10000ths of all processors */
	ULONGLONG last_cpu;  /* the job's processor time at the last tick, 100 ns */
	ULONGLONG last_tick; /* GetTickCount64 at the last tick */
	LONGLONG debt;	     /* time used beyond the share, 100 ns */
	HANDLE suspended[MAX_SUSPENDED];
	int n_suspended;
};

static CRITICAL_SECTION caps_lock;
static struct cap caps[MAX_CAPS];
static LONG n_caps; /* slots in use, read without the lock by CloseHandle */
static HANDLE throttle_thread;
static nt_process_fn suspend_process, resume_process;
static BOOL(WINAPI *real_close)(HANDLE h);

/* job_cpu is the processor time (kernel and user, 100 ns) of the job's live processes. */
static ULONGLONG job_cpu(HANDLE job)
{
	JOBOBJECT_BASIC_PROCESS_ID_LIST *l = job_pids(job);
	BYTE *snap;
	ULONGLONG t = 0, k, u;
	DWORD i;

	if (l == NULL)
		return 0;
	if ((snap = processes_snapshot()) != NULL) {
		for (i = 0; i < l->NumberOfProcessIdsInList; i++)
			if (snapshot_times(snap, (DWORD)l->ProcessIdList[i], &k, &u))
				t += k + u;
		HeapFree(GetProcessHeap(), 0, snap);
	}
	HeapFree(GetProcessHeap(), 0, l);
	return t;
}

/* release resumes what c suspended; caps_lock held. */
static void release(struct cap *c)
{
	int i;

	for (i = 0; i < c->n_suspended; i++) {
		resume_process(c->suspended[i]);
		real_close(c->suspended[i]);
	}
	c->n_suspended = 0;
}

/* hold suspends the job's processes that c has not suspended yet; caps_lock held. */
static void hold(struct cap *c)
{
	JOBOBJECT_BASIC_PROCESS_ID_LIST *l = job_pids(c->job);
	DWORD i;
	int j;

	if (l == NULL)
		return;
	for (i = 0; i < l->NumberOfProcessIdsInList && c->n_suspended < MAX_SUSPENDED; i++) {
		DWORD pid = (DWORD)l->ProcessIdList[i];
		HANDLE p;
		BOOL held = FALSE;

		for (j = 0; j < c->n_suspended && !held; j++)
			held = GetProcessId(c->suspended[j]) == pid;
		if (held || (p = OpenProcess(PROCESS_SUSPEND_RESUME | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid)) == NULL)
			continue;
		if (suspend_process(p) >= 0)
			c->suspended[c->n_suspended++] = p;
		else
			real_close(p);
	}
	HeapFree(GetProcessHeap(), 0, l);
}

static DWORD WINAPI throttle(LPVOID arg)
{
	DWORD procs = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);

	(void)arg;
	for (;;) {
		int i;

		Sleep(CAP_PERIOD_MS);
		EnterCriticalSection(&caps_lock);
		for (i = 0; i < MAX_CAPS; i++) {
			struct cap *c = &caps[i];
			ULONGLONG now, cpu, used, share;

			if (c->job == NULL)
				continue;
			now = GetTickCount64();
			cpu = job_cpu(c->job);
			used = cpu > c->last_cpu ? cpu - c->last_cpu : 0;
			/* ms * 10000 (100-ns units per ms) * processors * rate / 10000 */
			share = (now - c->last_tick) * procs * c->rate;
			c->last_cpu = cpu;
			c->last_tick = now;
			c->debt += (LONGLONG)used - (LONGLONG)share;
			if (c->debt < -(LONGLONG)share)
				c->debt = -(LONGLONG)share; /* no credit beyond one period */
			if (c->debt > 0)
				hold(c);
			else if (c->n_suspended > 0)
				release(c);
		}
		LeaveCriticalSection(&caps_lock);
	}
	return 0;
}

/* set_cap sets (rate > 0) or removes (rate 0) the hard cap of job. */
static BOOL set_cap(HANDLE job, DWORD rate)
{
	struct cap *free_slot = NULL;
	int i;

	EnterCriticalSection(&caps_lock);
	for (i = 0; i < MAX_CAPS; i++) {
		if (caps[i].job == job) {
			if (rate == 0) {
				release(&caps[i]);
				caps[i].job = NULL;
				InterlockedDecrement(&n_caps);
			} else {
				caps[i].rate = rate;
			}
			LeaveCriticalSection(&caps_lock);
			return TRUE;
		}
		if (caps[i].job == NULL && free_slot == NULL)
			free_slot = &caps[i];
	}
	if (rate == 0) {
		LeaveCriticalSection(&caps_lock);
		return TRUE;
	}
	if (free_slot == NULL || suspend_process == NULL || resume_process == NULL) {
		LeaveCriticalSection(&caps_lock);
		SetLastError(ERROR_NOT_ENOUGH_MEMORY);
		return FALSE;
	}
	ZeroMemory(free_slot, sizeof(*free_slot));
	free_slot->job = job;
	free_slot->rate = rate;
	free_slot->last_cpu = job_cpu(job);
	free_slot->last_tick = GetTickCount64();
	InterlockedIncrement(&n_caps);
	if (throttle_thread == NULL)
		throttle_thread = CreateThread(NULL, 0, throttle, NULL, 0, NULL);
	LeaveCriticalSection(&caps_lock);
	return TRUE;
}

/* compat_close ends the cap of a job handle that is closed, then closes it. */
static BOOL WINAPI compat_close(HANDLE h)
{
	if (n_caps > 0)
		set_cap(h, 0);
	winemem_close(h);
	return real_close(h);
}

static BOOL(WINAPI *real_assign)(HANDLE job, HANDLE process);

static BOOL WINAPI compat_assign(HANDLE job, HANDLE process)
{
	if (!real_assign(job, process))
		return FALSE;
	winemem_assign(job, process);
	return TRUE;
}

/* set_extended keeps the extended limits Wine's own function accepted, for queries and for
 * winemem.c's enforcement. */
static BOOL set_extended(HANDLE job, LPVOID info, DWORD len)
{
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION ext;
	JOBOBJECT_BASIC_PROCESS_ID_LIST *pids;
	BOOL ok;

	if (info == NULL || len != sizeof(ext)) {
		SetLastError(ERROR_BAD_LENGTH);
		return FALSE;
	}
	if (!real_set(job, (JOBOBJECTINFOCLASS)CLASS_EXTENDED_LIMIT, info, len))
		return FALSE;
	CopyMemory(&ext, info, sizeof(ext));
	pids = job_pids(job);
	ok = winemem_set_limits(job, &ext, pids);
	if (pids != NULL)
		HeapFree(GetProcessHeap(), 0, pids);
	return ok;
}

/* set_weight gives the job's processes the weight (0: none), through winemem.c's table. */
static BOOL set_weight(HANDLE job, DWORD weight)
{
	JOBOBJECT_BASIC_PROCESS_ID_LIST *pids = job_pids(job);
	BOOL ok = winemem_set_weight(job, weight, pids);

	if (pids != NULL)
		HeapFree(GetProcessHeap(), 0, pids);
	return ok;
}

static BOOL WINAPI compat_set(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len)
{
	JOBOBJECT_BASIC_ACCOUNTING_INFORMATION check;
	DWORD v[2];

	if ((DWORD)cls == CLASS_EXTENDED_LIMIT)
		return set_extended(job, info, len);
	if ((DWORD)cls != CLASS_CPU_RATE_CONTROL)
		return real_set(job, cls, info, len);
	if (!real_query(job, (JOBOBJECTINFOCLASS)CLASS_BASIC_ACCOUNTING, &check, sizeof(check), NULL))
		return FALSE;
	if (info == NULL || len != sizeof(v)) {
		SetLastError(ERROR_BAD_LENGTH);
		return FALSE;
	}
	CopyMemory(v, info, sizeof(v));
	if (!cpu_rate_valid(v[0], v[1])) {
		SetLastError(ERROR_INVALID_PARAMETER);
		return FALSE;
	}
	if (!set_weight(job, (v[0] & CPU_WEIGHT_BASED) ? v[1] : 0))
		return FALSE;
	if (v[0] & CPU_HARD_CAP)
		return set_cap(job, v[1]);
	if (v[0] & CPU_MIN_MAX_RATE)
		return set_cap(job, HIWORD(v[1]));
	return set_cap(job, 0); /* off, a weight (winemem.c) or a soft rate (accepted, not enforced) */
}

BOOL winejob_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");
	HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");

	if (kernel32 == NULL)
		return FALSE;
	real_query = (query_job_fn)(void *)GetProcAddress(kernel32, "QueryInformationJobObject");
	real_set = (set_job_fn)(void *)GetProcAddress(kernel32, "SetInformationJobObject");
	real_close = (BOOL(WINAPI *)(HANDLE))(void *)GetProcAddress(kernel32, "CloseHandle");
	real_assign = (BOOL(WINAPI *)(HANDLE, HANDLE))(void *)GetProcAddress(kernel32, "AssignProcessToJobObject");
	real_get_process_times = (get_process_times_fn)(void *)GetProcAddress(kernel32, "GetProcessTimes");
	if (ntdll != NULL) {
		suspend_process = (nt_process_fn)(void *)GetProcAddress(ntdll, "NtSuspendProcess");
		resume_process = (nt_process_fn)(void *)GetProcAddress(ntdll, "NtResumeProcess");
		query_system = (query_system_fn)(void *)GetProcAddress(ntdll, "NtQuerySystemInformation");
	}
	if (real_query == NULL || real_set == NULL || real_close == NULL || real_get_process_times == NULL ||
	    real_assign == NULL)
		return FALSE;
	InitializeCriticalSection(&caps_lock);
	return winecompat_patch_export((BYTE *)kernel32, "QueryInformationJobObject", (void *)compat_query) &&
	       winecompat_patch_export((BYTE *)kernel32, "SetInformationJobObject", (void *)compat_set) &&
	       winecompat_patch_export((BYTE *)kernel32, "CloseHandle", (void *)compat_close) &&
	       winecompat_patch_export((BYTE *)kernel32, "AssignProcessToJobObject", (void *)compat_assign) &&
	       winecompat_patch_export((BYTE *)kernel32, "GetProcessTimes", (void *)compat_get_process_times);
}
