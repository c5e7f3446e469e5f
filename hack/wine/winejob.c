/*
 * winejob.c: the two job object information classes a HostProcess container's job needs
 * (docs/hostprocess.md) and Wine 8 lacks. Installed by winecompat_install (winecompat.c) under
 * Wine only, in place of kernel32's exports QueryInformationJobObject and
 * SetInformationJobObject; every other class goes to Wine's own functions unchanged.
 *
 * Observed under Wine 8.0 (Debian 12; ../shared/notes/hostprocess-facts.md §6):
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
 *   ERROR_INVALID_PARAMETER (documented constraints of the structure). A valid value is
 *   accepted and NOT ENFORCED: Wine has no CPU rate control, and processes of the job run at
 *   full speed (docs/hostprocess.md says so). The value is not kept: a query of class 15 still
 *   gets Wine's answer.
 * Both check the handle first with a query Wine does answer (JobObjectBasicAccountingInformation),
 * so a handle that is no job fails as Wine fails it (ERROR_INVALID_HANDLE).
 *
 * Go programs find both with GetProcAddress (golang.org/x/sys/windows' lazy kernel32 procs).
 * Tested in internal/wintest, TestJobAccounting and TestJobCPURateControl.
 */
#include <windows.h>

#include "winecompat.h"

#define CLASS_BASIC_ACCOUNTING 1
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

static BOOL basic_and_io(HANDLE job, JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION *out, DWORD len, LPDWORD ret)
{
	JOBOBJECT_BASIC_ACCOUNTING_INFORMATION check;
	JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION a;
	JOBOBJECT_BASIC_PROCESS_ID_LIST *l;
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
	ZeroMemory(&a, sizeof(a));
	for (i = 0; i < l->NumberOfProcessIdsInList; i++) {
		HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)l->ProcessIdList[i]);
		FILETIME created, exited, kernel, user;
		IO_COUNTERS io;

		if (p == NULL)
			continue; /* ended since the list was taken */
		a.BasicInfo.TotalProcesses++;
		a.BasicInfo.ActiveProcesses++;
		if (GetProcessTimes(p, &created, &exited, &kernel, &user)) {
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
	a.BasicInfo.ThisPeriodTotalKernelTime = a.BasicInfo.TotalKernelTime;
	a.BasicInfo.ThisPeriodTotalUserTime = a.BasicInfo.TotalUserTime;
	CopyMemory(out, &a, sizeof(a));
	if (ret != NULL)
		*ret = sizeof(a);
	return TRUE;
}

static BOOL WINAPI compat_query(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len, LPDWORD ret)
{
	if ((DWORD)cls == CLASS_BASIC_AND_IO_ACCOUNTING && !real_query(job, cls, info, len, ret) &&
	    GetLastError() == ERROR_INVALID_FUNCTION)
		return basic_and_io(job, info, len, ret);
	return real_query(job, cls, info, len, ret);
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

static BOOL WINAPI compat_set(HANDLE job, JOBOBJECTINFOCLASS cls, LPVOID info, DWORD len)
{
	JOBOBJECT_BASIC_ACCOUNTING_INFORMATION check;
	DWORD v[2];

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
	return TRUE; /* accepted, not enforced: see above */
}

BOOL winejob_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");

	if (kernel32 == NULL)
		return FALSE;
	real_query = (query_job_fn)(void *)GetProcAddress(kernel32, "QueryInformationJobObject");
	real_set = (set_job_fn)(void *)GetProcAddress(kernel32, "SetInformationJobObject");
	if (real_query == NULL || real_set == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)kernel32, "QueryInformationJobObject", (void *)compat_query) &&
	       winecompat_patch_export((BYTE *)kernel32, "SetInformationJobObject", (void *)compat_set);
}
