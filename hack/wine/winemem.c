/*
 * winemem.c: a job object's memory limits and CPU weight, which Wine 8 accepts (winejob.c the
 * weight) and neither keeps nor enforces.
 * Linked into bcryptprimitives.dll (every Go program loads it first); installed by
 * winecompat_install under Wine only. winejob.c hands it the job calls (winemem_set_limits,
 * winemem_query_limits, winemem_assign, winemem_close).
 *
 * What Windows does (documented, "JOBOBJECT_EXTENDED_LIMIT_INFORMATION structure" and
 * "JOBOBJECT_BASIC_LIMIT_INFORMATION structure"):
 * - JOB_OBJECT_LIMIT_JOB_MEMORY (0x200) limits the virtual memory committed by all the job's
 *   processes together to JobMemoryLimit; JOB_OBJECT_LIMIT_PROCESS_MEMORY (0x100) limits each
 *   process's to ProcessMemoryLimit. "When a process attempts to commit memory that would exceed
 *   the job-wide limit, it fails." The system tracks PeakProcessMemoryUsed ("the peak memory
 *   used by any process ever associated with the job") and PeakJobMemoryUsed, and a query of
 *   JobObjectExtendedLimitInformation answers the limits as set with both peaks.
 * - The failing commit's status is STATUS_COMMITMENT_LIMIT, ERROR_COMMITMENT_LIMIT (1455) from
 *   VirtualAlloc: observed in Windows containers, whose memory limit is a job's, as Go's
 *   "runtime: VirtualAlloc of 8192 bytes failed with errno=1455" (DataDog/datadog-agent#5638)
 *   and ASan's "error code: 1455" (microsoft/ebpf-for-windows#1719).
 * - A process's children belong to its job (documented, "Job Objects": "all processes
 *   associated with a job ... a process created by a process in the job is associated with the
 *   job too" unless it breaks away).
 *
 * Observed under Wine 8.0 (Debian 12), 2026-11-27: SetInformationJobObject(
 * JobObjectExtendedLimitInformation) with JOB_OBJECT_LIMIT_JOB_MEMORY and 64 MiB succeeds, a
 * query then answers LimitFlags 0 and JobMemoryLimit 0, and a process of the job allocated and
 * touched 300 MiB; IsProcessInJob(self, NULL) is TRUE in a process of the job and in its child.
 *
 * How it is filled in. Every Go process maps one table, the named section
 * Global\runhcs-wine-jobmem-1 (one wineserver per prefix, so one table per emulated node),
 * guarded by the named mutex Global\runhcs-wine-jobmem-1-lock (a dead holder abandons it, as
 * Windows' mutexes). The table holds:
 * - a job entry per job whose extended limits or CPU weight were set: the
 *   JOBOBJECT_EXTENDED_LIMIT_INFORMATION as set, the peaks, the weight, and the process and
 *   handle that set them (a handle value is only meaningful in its process, and the entry is
 *   found again through it);
 * - a process record per Go process: its pid, creation time (Wine reuses pids), Linux pid, the
 *   job entry it belongs to if any, and the private memory it has committed. Each process
 *   writes its own when it starts and clears it when it exits.
 * The process that sets the limits or assigns a process (the shim) marks the job's processes'
 * records; a process of the job learns it when it starts (the shim starts them suspended and
 * assigns them first) or, if it was assigned later, at its next commit (the table's generation
 * changes with every entry), and a child of such a process takes its parent's job when Wine
 * says it is in a job, as Windows' job inheritance does. Each process then charges its own
 * commits: kernelbase's imports of NtAllocateVirtualMemory(Ex) and NtFreeVirtualMemory
 * (VirtualAlloc, VirtualAllocEx, VirtualFree, the calls Go's runtime makes) are wrapped; a
 * MEM_COMMIT of pages not yet committed is charged before it is made and fails with
 * STATUS_COMMITMENT_LIMIT if the process's or the job's total would pass its limit; a decommit
 * or release gives back the private pages it uncommits. A process's commit starts as what it
 * had committed when it learnt its job (its private committed regions, VirtualQuery), and is
 * measured again that way before a failure and at most once a second, so that what Wine
 * commits inside ntdll (its heaps, thread stacks) is counted too.
 *
 * The CPU weight (JOB_OBJECT_CPU_RATE_CONTROL_WEIGHT_BASED, set through winejob.c: "the share of
 * processor time given to the job relative to other workloads on the processor", 1..9, 5 the
 * default) is the Linux nice value of the job's threads (nice_of), and of the session's
 * scheduling group of a job process that leads its session (renice_autogroup: Wine gives a
 * process made with a new console, as the shim makes a container's, a Linux session of its
 * own): the process that sets it renices the job's processes that run (their Linux pids are in
 * the table), and a process that starts in the job renices its own; threads made later
 * inherit it.
 *
 * DEVIATIONS (assumptions where Windows is not documented):
 * - Only programs that load this DLL (Go programs) charge their commits or take the weight;
 *   another program in the job is counted through nothing and limited by nothing.
 * - A process assigned to a weighted job while it runs takes the weight at its next commit.
 * - A job process in a session it does not lead, with the kernel's autogroup scheduling on,
 *   takes the weight against the other processes of that session only.
 * - Commits Wine makes inside ntdll between measurements are seen up to a second late; a commit
 *   made into another process (VirtualAllocEx of another process) is not charged.
 * - Under Wine a process commits more than on Windows (observed: a Go test program 26 MiB
 *   private, its threads' stacks committed whole), so a job fills sooner than on Windows: the
 *   emulated node is stricter, never more forgiving.
 * - No JOB_OBJECT_MSG_*_MEMORY_LIMIT messages are posted.
 * - A process killed without running its DLL detach keeps its record until a charge that would
 *   fail or a full table checks whether its pid still lives.
 * Tested in internal/wintest, TestJobMemoryLimit and TestJobCPUWeight, and through CRI in
 * test/cri TestUpdateMemoryLimit/hostprocess.
 */
#include <windows.h>
#include <winternl.h>

#include "winecompat.h"

#define JOB_MEMORY 0x200
#define PROCESS_MEMORY 0x100
#define STATUS_COMMITMENT_LIMIT_ ((NTSTATUS)0xC000012DL)
#define MEM_PRIVATE_ 0x20000

#define MAX_JOBS 256
#define MAX_PROCS 4096
#define RESYNC_MS 1000

struct mem_job {
	LONG used;
	DWORD owner_pid; /* the process whose handle set the limits; 0 once it closed it */
	ULONGLONG owner_created;
	ULONG_PTR owner_handle;
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION info; /* as set */
	ULONGLONG peak_job, peak_process;
	LONG cpu_weight; /* JOB_OBJECT_CPU_RATE_CONTROL_WEIGHT_BASED's 1..9, 0 for none */
	LONG pad;
};

struct mem_proc {
	DWORD pid; /* 0: free */
	LONG job;  /* index into jobs */
	ULONGLONG created;
	ULONGLONG commit; /* private bytes committed */
	LONG measured;    /* commit has been measured by the process itself */
	LONG unix_pid;    /* the Linux process, written by the process itself (0 until then) */
};

struct mem_table {
	volatile LONG generation;
	LONG pad;
	struct mem_job jobs[MAX_JOBS];
	struct mem_proc procs[MAX_PROCS];
};

typedef NTSTATUS(NTAPI *allocate_fn)(HANDLE process, PVOID *base, ULONG_PTR zero_bits, SIZE_T *size, ULONG type,
				     ULONG protect);
typedef NTSTATUS(NTAPI *allocate_ex_fn)(HANDLE process, PVOID *base, SIZE_T *size, ULONG type, ULONG protect,
					PVOID params, ULONG count);
typedef NTSTATUS(NTAPI *free_fn)(HANDLE process, PVOID *base, SIZE_T *size, ULONG type);
typedef NTSTATUS(NTAPI *close_fn)(HANDLE h);
typedef NTSTATUS(NTAPI *query_process_fn)(HANDLE process, ULONG cls, PVOID info, ULONG len, PULONG ret);

static allocate_fn real_allocate;
static allocate_ex_fn real_allocate_ex;
static free_fn real_free;
static close_fn nt_close;
static query_process_fn query_process;

static struct mem_table *table;
static HANDLE table_lock;
static DWORD self_pid;
static ULONGLONG self_created;
static LONG seen_generation = -1;
static LONG self_slot = -1; /* this process's record, or -1 */
static LONG applied_weight; /* the CPU weight this process last gave its own threads */
static ULONGLONG last_measure;
static LONG owned; /* job entries this process made: CloseHandle needs the table only then */

static void lock(void)
{
	/* WAIT_ABANDONED: a holder died; the table is consistent between calls, so go on. */
	WaitForSingleObject(table_lock, INFINITE);
}

static void unlock(void)
{
	ReleaseMutex(table_lock);
}

/* process_created: p's creation time (NtQueryInformationProcess(ProcessTimes), not
 * GetProcessTimes, which winejob.c answers from a snapshot of every process). */
static ULONGLONG process_created(HANDLE p)
{
	LARGE_INTEGER times[4]; /* KERNEL_USER_TIMES: creation, exit, kernel, user */

	if (query_process == NULL || query_process(p, 4 /* ProcessTimes */, times, sizeof(times), NULL) < 0)
		return 0;
	return (ULONGLONG)times[0].QuadPart;
}

/* alive: pid is still the process created at created. */
static BOOL alive(DWORD pid, ULONGLONG created)
{
	HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
	DWORD code = 0;
	BOOL ok;

	if (p == NULL)
		return FALSE;
	ok = GetExitCodeProcess(p, &code) && code == STILL_ACTIVE && process_created(p) == created;
	nt_close(p); /* not CloseHandle: winejob.c's takes locks of its own */
	return ok;
}

/* committed measures the private committed bytes in [from, to), or in the whole allocation that
 * begins at from when to is 0. */
static ULONGLONG committed(BYTE *from, BYTE *to)
{
	MEMORY_BASIC_INFORMATION m;
	ULONGLONG n = 0;
	BYTE *at = from;
	PVOID alloc_base = NULL;

	while ((to == NULL || at < to) && VirtualQuery(at, &m, sizeof(m)) == sizeof(m)) {
		BYTE *end = (BYTE *)m.BaseAddress + m.RegionSize;

		if (to == NULL) {
			if (alloc_base == NULL)
				alloc_base = m.AllocationBase;
			if (m.State == MEM_FREE || m.AllocationBase != alloc_base)
				break;
		}
		if (m.State == MEM_COMMIT && m.Type == MEM_PRIVATE_)
			n += (ULONGLONG)((to != NULL && end > to ? to : end) - (at > (BYTE *)m.BaseAddress ? at : (BYTE *)m.BaseAddress));
		if (end <= at)
			break;
		at = end;
	}
	return n;
}

/* measure_self: every private committed byte of this process. */
static ULONGLONG measure_self(void)
{
	SYSTEM_INFO si;

	GetSystemInfo(&si);
	last_measure = GetTickCount64();
	return committed((BYTE *)si.lpMinimumApplicationAddress, (BYTE *)si.lpMaximumApplicationAddress);
}

static LONG find_proc(DWORD pid, ULONGLONG created)
{
	LONG i;

	for (i = 0; i < MAX_PROCS; i++) {
		if (table->procs[i].pid == pid && (created == 0 || table->procs[i].created == created))
			return i;
	}
	return -1;
}

/* find_parent finds the record of this process's parent, pid: of the processes that had that
 * pid (Wine reuses them), the last one created before this process. */
static LONG find_parent(DWORD pid)
{
	LONG i, best = -1;

	for (i = 0; i < MAX_PROCS; i++) {
		const struct mem_proc *r = &table->procs[i];

		if (r->pid == pid && r->created <= self_created && (best < 0 || r->created > table->procs[best].created))
			best = i;
	}
	return best;
}

/* prune frees the records of processes that are gone (and of job's only, if job >= 0). */
static void prune(LONG job)
{
	LONG i;

	for (i = 0; i < MAX_PROCS; i++) {
		struct mem_proc *r = &table->procs[i];

		if (r->pid == 0 || (job >= 0 && r->job != job) || r->pid == self_pid)
			continue;
		if (!alive(r->pid, r->created))
			ZeroMemory(r, sizeof(*r));
	}
}

/* add_proc records pid (created at created) as a process of job; -1 if the table is full. */
static LONG add_proc(DWORD pid, ULONGLONG created, LONG job)
{
	LONG i = find_proc(pid, created), pass;

	for (pass = 0; i < 0 && pass < 2; pass++) {
		for (i = 0; i < MAX_PROCS && table->procs[i].pid != 0; i++)
			;
		if (i == MAX_PROCS) {
			i = -1;
			if (pass == 0)
				prune(-1);
		}
	}
	if (i < 0) {
		winecompat_log_error("winemem: process table full; not charged: pid ", pid, ERROR_NOT_ENOUGH_MEMORY);
		return -1;
	}
	if (table->procs[i].pid != pid) {
		ZeroMemory(&table->procs[i], sizeof(table->procs[i]));
		table->procs[i].pid = pid;
		table->procs[i].created = created;
		table->procs[i].job = -1;
	}
	if (table->procs[i].job != job) {
		/* Joined a job: the process measures its commit again when it next looks. */
		table->procs[i].job = job;
		table->procs[i].commit = 0;
		table->procs[i].measured = 0;
	}
	return i;
}

#define LINUX_SYS_WRITE 1
#define LINUX_SYS_CLOSE 3
#define LINUX_SYS_GETPID 39
#define LINUX_SYS_GETSID 124
#define LINUX_SYS_SETPRIORITY 141
#define LINUX_SYS_GETDENTS64 217
#define LINUX_SYS_OPENAT 257
#define LINUX_AT_FDCWD ((LONG_PTR)-100)
#define LINUX_O_RDONLY_DIRECTORY 0200000
#define LINUX_O_WRONLY 01
#define LINUX_ENOENT 2
#define LINUX_PRIO_PROCESS 0

/* nice_of maps a job's CPU weight to a Linux nice value, which sets the share of processor time
 * Linux's scheduler gives a thread against the others that want it: weight 5, Windows' default
 * "for most workloads", is nice 0, like every process outside such a job; each step of weight is
 * two of nice (each about 1.25 times the share), so 9 is nice -8 (about 6 times the share of a
 * weight-5 thread) and 1 nice 8 (about a sixth). ASSUMPTION: Windows documents the weight as
 * "the share of processor time given to the job relative to other workloads on the processor"
 * and no figure; this keeps the order and the default. */
static LONG nice_of(LONG weight)
{
	return weight == 0 ? 0 : (5 - weight) * 2;
}

/* append_dec writes v in decimal at s and answers the end. */
static char *append_dec(char *s, LONG v)
{
	char d[12];
	int n = 0;

	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	while (n > 0)
		*s++ = d[--n];
	*s = 0;
	return s;
}

/* renice_autogroup gives the autogroup of Linux process unix_pid the nice value nice if the
 * process leads its session. With the kernel's autogroup scheduling on
 * (/proc/sys/kernel/sched_autogroup_enabled), every session is a group that shares processor
 * time with the other sessions by the group's nice value (/proc/<pid>/autogroup, sched(7)),
 * and a thread's own nice value orders it only within its session. Wine starts a process made
 * with a new console (CREATE_NEW_CONSOLE, as the shim starts a HostProcess container's) in a
 * session of its own (observed under Wine 8: a weight as the threads' nice value alone made no
 * difference to such processes, internal/wintest TestJobCPUWeight/new_console), so its
 * session is its job's, and the session's share is the weight. A process in a session it does
 * not lead shares it with processes of no job (the test's, the shim's), whose group keeps its
 * nice value. Without autogroup scheduling the file does not exist, and the threads' values
 * do it all. Under the lock. */
static void renice_autogroup(LONG unix_pid, LONG nice)
{
	char path[48] = "/proc/", line[16], *end;
	LONG_PTR fd, r;

	if (winecompat_linux_syscall4(LINUX_SYS_GETSID, unix_pid, 0, 0, 0) != unix_pid)
		return;
	lstrcpyA(append_dec(path + 6, unix_pid), "/autogroup");
	fd = winecompat_linux_syscall4(LINUX_SYS_OPENAT, LINUX_AT_FDCWD, (LONG_PTR)path, LINUX_O_WRONLY, 0);
	if (fd < 0) {
		if (fd != -LINUX_ENOENT) /* ENOENT: no autogroup scheduling, or the process is gone */
			winecompat_log_error("winemem: open the autogroup of Linux process ", (unsigned long)unix_pid, (unsigned long)-fd);
		return;
	}
	end = line;
	if (nice < 0) {
		*end++ = '-';
		end = append_dec(end, -nice);
	} else {
		end = append_dec(end, nice);
	}
	*end++ = '\n';
	r = winecompat_linux_syscall4(LINUX_SYS_WRITE, fd, (LONG_PTR)line, end - line, 0);
	if (r < 0)
		winecompat_log_error("winemem: set the autogroup nice value of Linux process ", (unsigned long)unix_pid, (unsigned long)-r);
	winecompat_linux_syscall4(LINUX_SYS_CLOSE, fd, 0, 0, 0);
}

/* renice gives every thread of Linux process unix_pid the nice value nice (threads it makes
 * later inherit it from their maker), and its session's group too if it leads it
 * (renice_autogroup). Under the lock. */
static void renice(LONG unix_pid, LONG nice)
{
	struct {
		ULONGLONG ino, off;
		USHORT reclen;
		BYTE type;
		char name[1];
	} *e;
	union {
		ULONGLONG align;
		BYTE b[4096];
	} buf;
	char path[48] = "/proc/";
	LONG_PTR fd, n, off;

	lstrcpyA(append_dec(path + 6, unix_pid), "/task");
	fd = winecompat_linux_syscall4(LINUX_SYS_OPENAT, LINUX_AT_FDCWD, (LONG_PTR)path, LINUX_O_RDONLY_DIRECTORY, 0);
	if (fd < 0)
		return; /* gone */
	while ((n = winecompat_linux_syscall4(LINUX_SYS_GETDENTS64, fd, (LONG_PTR)buf.b, sizeof(buf.b), 0)) > 0) {
		for (off = 0; off < n; off += e->reclen) {
			LONG tid = 0;
			const char *c;
			LONG_PTR r;

			e = (void *)(buf.b + off);
			for (c = e->name; *c >= '0' && *c <= '9'; c++)
				tid = tid * 10 + (*c - '0');
			if (*c != 0 || tid == 0)
				continue;
			r = winecompat_linux_syscall4(LINUX_SYS_SETPRIORITY, LINUX_PRIO_PROCESS, tid, nice, 0);
			if (r < 0)
				winecompat_log_error("winemem: setpriority of Linux thread ", (unsigned long)tid, (unsigned long)-r);
		}
	}
	winecompat_linux_syscall4(LINUX_SYS_CLOSE, fd, 0, 0, 0);
	renice_autogroup(unix_pid, nice);
}

/* bind_self finds this process's record (or its parent's job), under the lock. */
static void bind_self(void)
{
	LONG g = table->generation;

	lock();
	self_slot = find_proc(self_pid, self_created);
	if ((self_slot < 0 || table->procs[self_slot].job < 0) && query_process != NULL) {
		PROCESS_BASIC_INFORMATION pbi;
		BOOL in_job = FALSE;
		LONG parent;

		if (query_process(GetCurrentProcess(), ProcessBasicInformation, &pbi, sizeof(pbi), NULL) >= 0 &&
		    (parent = find_parent((DWORD)(ULONG_PTR)pbi.InheritedFromUniqueProcessId)) >= 0 &&
		    table->procs[parent].job >= 0 && IsProcessInJob(GetCurrentProcess(), NULL, &in_job) && in_job)
			self_slot = add_proc(self_pid, self_created, table->procs[parent].job);
	}
	if (self_slot < 0)
		self_slot = add_proc(self_pid, self_created, -1); /* known, in no job of the table */
	if (self_slot >= 0) {
		struct mem_proc *r = &table->procs[self_slot];

		if (r->unix_pid == 0)
			r->unix_pid = (LONG)winecompat_linux_syscall4(LINUX_SYS_GETPID, 0, 0, 0, 0);
		if (r->job >= 0 && !r->measured) {
			r->commit = measure_self();
			r->measured = 1;
		}
		if (r->job >= 0 && table->jobs[r->job].cpu_weight != applied_weight) {
			applied_weight = table->jobs[r->job].cpu_weight;
			renice(r->unix_pid, nice_of(applied_weight));
		}
	}
	seen_generation = g;
	unlock();
}

static BOOL is_self(HANDLE process)
{
	return process == GetCurrentProcess() || GetProcessId(process) == self_pid;
}

/* charge adds n bytes to this process's commit: FALSE, charging nothing, if that would pass
 * its job's process or job limit. */
static BOOL charge(ULONGLONG n)
{
	ULONGLONG now_measured = 0;
	int attempt;

	if (GetTickCount64() - last_measure > RESYNC_MS)
		now_measured = measure_self();
	lock();
	for (attempt = 0; attempt < 2; attempt++) {
		struct mem_proc *self = &table->procs[self_slot];
		struct mem_job *job = &table->jobs[self->job];
		DWORD flags = job->info.BasicLimitInformation.LimitFlags;
		ULONGLONG total = 0, mine;
		LONG i;

		if (now_measured != 0)
			self->commit = now_measured;
		mine = self->commit + n;
		for (i = 0; i < MAX_PROCS; i++) {
			if (table->procs[i].pid != 0 && table->procs[i].job == self->job && i != self_slot)
				total += table->procs[i].commit;
		}
		total += mine;
		if ((!(flags & PROCESS_MEMORY) || mine <= job->info.ProcessMemoryLimit) &&
		    (!(flags & JOB_MEMORY) || total <= job->info.JobMemoryLimit)) {
			self->commit = mine;
			if (mine > job->peak_process)
				job->peak_process = mine;
			if (total > job->peak_job)
				job->peak_job = total;
			unlock();
			return TRUE;
		}
		/* Over a limit: count again what is really there before failing. */
		prune(self->job);
		now_measured = measure_self();
	}
	unlock();
	return FALSE;
}

static void uncharge(ULONGLONG n)
{
	struct mem_proc *self;

	lock();
	self = &table->procs[self_slot];
	self->commit = self->commit > n ? self->commit - n : 0;
	unlock();
}

/* charged answers whether this process's commits are charged now. */
static BOOL charged(HANDLE process)
{
	if (table == NULL || !is_self(process))
		return FALSE;
	if (table->generation != seen_generation)
		bind_self();
	return self_slot >= 0 && table->procs[self_slot].job >= 0;
}

static ULONGLONG page_down(ULONG_PTR v)
{
	return v & ~(ULONG_PTR)0xFFF;
}

static ULONGLONG page_up(ULONG_PTR v)
{
	return (v + 0xFFF) & ~(ULONG_PTR)0xFFF;
}

/* to_commit: the bytes a MEM_COMMIT of size at base would newly commit. */
static ULONGLONG to_commit(PVOID base, SIZE_T size)
{
	BYTE *from, *to;

	if (base == NULL)
		return page_up(size);
	from = (BYTE *)page_down((ULONG_PTR)base);
	to = (BYTE *)page_up((ULONG_PTR)base + size);
	return (ULONGLONG)(to - from) - committed(from, to);
}

static NTSTATUS commit_checked(ULONGLONG n, NTSTATUS (*call)(void *), void *ctx)
{
	NTSTATUS st;

	if (n > 0 && !charge(n))
		return STATUS_COMMITMENT_LIMIT_;
	st = call(ctx);
	if (st < 0 && n > 0)
		uncharge(n);
	return st;
}

struct allocate_args {
	HANDLE process;
	PVOID *base;
	ULONG_PTR zero_bits;
	SIZE_T *size;
	ULONG type, protect;
	PVOID params;
	ULONG count;
};

static NTSTATUS call_allocate(void *p)
{
	struct allocate_args *a = p;

	return real_allocate(a->process, a->base, a->zero_bits, a->size, a->type, a->protect);
}

static NTSTATUS call_allocate_ex(void *p)
{
	struct allocate_args *a = p;

	return real_allocate_ex(a->process, a->base, a->size, a->type, a->protect, a->params, a->count);
}

static NTSTATUS NTAPI mem_allocate(HANDLE process, PVOID *base, ULONG_PTR zero_bits, SIZE_T *size, ULONG type,
				   ULONG protect)
{
	struct allocate_args a = {process, base, zero_bits, size, type, protect, NULL, 0};

	if (!(type & MEM_COMMIT) || base == NULL || size == NULL || !charged(process))
		return real_allocate(process, base, zero_bits, size, type, protect);
	return commit_checked(to_commit(*base, *size), call_allocate, &a);
}

static NTSTATUS NTAPI mem_allocate_ex(HANDLE process, PVOID *base, SIZE_T *size, ULONG type, ULONG protect,
				      PVOID params, ULONG count)
{
	struct allocate_args a = {process, base, 0, size, type, protect, params, count};

	if (!(type & MEM_COMMIT) || base == NULL || size == NULL || !charged(process))
		return real_allocate_ex(process, base, size, type, protect, params, count);
	return commit_checked(to_commit(*base, *size), call_allocate_ex, &a);
}

static NTSTATUS NTAPI mem_free(HANDLE process, PVOID *base, SIZE_T *size, ULONG type)
{
	ULONGLONG n = 0;
	NTSTATUS st;

	if (!(type & (MEM_DECOMMIT | MEM_RELEASE)) || base == NULL || size == NULL || !charged(process))
		return real_free(process, base, size, type);
	if (*size == 0)
		n = committed((BYTE *)*base, NULL); /* the whole allocation from base */
	else
		n = committed((BYTE *)page_down((ULONG_PTR)*base), (BYTE *)page_up((ULONG_PTR)*base + *size));
	st = real_free(process, base, size, type);
	if (st >= 0 && n > 0)
		uncharge(n);
	return st;
}

/* job_of finds the entry this process made for handle job, under the lock; -1 if none. */
static LONG job_of(HANDLE job)
{
	LONG i;

	for (i = 0; i < MAX_JOBS; i++) {
		struct mem_job *j = &table->jobs[i];

		if (j->used && j->owner_pid == self_pid && j->owner_created == self_created &&
		    j->owner_handle == (ULONG_PTR)job)
			return i;
	}
	return -1;
}

/* new_job takes a free entry, or one whose owner closed its handle (or died) and whose
 * processes are gone; -1 if none. */
static LONG new_job(void)
{
	LONG i, k;

	for (i = 0; i < MAX_JOBS; i++) {
		if (!table->jobs[i].used)
			return i;
	}
	prune(-1);
	for (i = 0; i < MAX_JOBS; i++) {
		struct mem_job *j = &table->jobs[i];
		BOOL busy = j->owner_pid != 0 && alive(j->owner_pid, j->owner_created);

		for (k = 0; k < MAX_PROCS && !busy; k++)
			busy = table->procs[k].pid != 0 && table->procs[k].job == i;
		if (!busy)
			return i;
	}
	return -1;
}

/* entry_for finds or makes the entry of handle job, under the lock; -1 if the table is full. */
static LONG entry_for(HANDLE job)
{
	LONG i = job_of(job);

	if (i < 0 && (i = new_job()) >= 0) {
		ZeroMemory(&table->jobs[i], sizeof(table->jobs[i]));
		table->jobs[i].used = 1;
		table->jobs[i].owner_pid = self_pid;
		table->jobs[i].owner_created = self_created;
		table->jobs[i].owner_handle = (ULONG_PTR)job;
		InterlockedIncrement(&owned);
	}
	if (i < 0)
		winecompat_log_error("winemem: job table full; limits not kept, job handle ", (ULONG_PTR)job,
				     ERROR_NOT_ENOUGH_MEMORY);
	return i;
}

/* enroll records the job's processes so far (the limits may come after them: an Update). */
static void enroll(LONG i, const JOBOBJECT_BASIC_PROCESS_ID_LIST *pids)
{
	DWORD k;

	for (k = 0; pids != NULL && k < pids->NumberOfProcessIdsInList; k++) {
		DWORD pid = (DWORD)pids->ProcessIdList[k];
		HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);

		if (p == NULL)
			continue;
		add_proc(pid, process_created(p), i);
		nt_close(p);
	}
}

BOOL winemem_set_limits(HANDLE job, const JOBOBJECT_EXTENDED_LIMIT_INFORMATION *info,
			const JOBOBJECT_BASIC_PROCESS_ID_LIST *pids)
{
	LONG i;

	if (table == NULL)
		return TRUE;
	lock();
	if ((i = entry_for(job)) < 0) {
		unlock();
		SetLastError(ERROR_NOT_ENOUGH_MEMORY);
		return FALSE;
	}
	table->jobs[i].info = *info;
	ZeroMemory(&table->jobs[i].info.IoInfo, sizeof(table->jobs[i].info.IoInfo));
	table->jobs[i].info.PeakProcessMemoryUsed = 0;
	table->jobs[i].info.PeakJobMemoryUsed = 0;
	enroll(i, pids);
	InterlockedIncrement(&table->generation);
	unlock();
	return TRUE;
}

BOOL winemem_set_weight(HANDLE job, DWORD weight, const JOBOBJECT_BASIC_PROCESS_ID_LIST *pids)
{
	LONG i, k;

	if (table == NULL)
		return TRUE;
	lock();
	i = weight != 0 ? entry_for(job) : (owned > 0 ? job_of(job) : -1);
	if (i < 0) {
		unlock();
		if (weight == 0)
			return TRUE; /* no weight was set through this handle: nothing to undo */
		SetLastError(ERROR_NOT_ENOUGH_MEMORY);
		return FALSE;
	}
	table->jobs[i].cpu_weight = (LONG)weight;
	enroll(i, pids);
	/* The processes that run already (their own start applies it to those that start later). */
	for (k = 0; k < MAX_PROCS; k++) {
		if (table->procs[k].pid != 0 && table->procs[k].job == i && table->procs[k].unix_pid != 0)
			renice(table->procs[k].unix_pid, nice_of((LONG)weight));
	}
	InterlockedIncrement(&table->generation);
	unlock();
	return TRUE;
}

BOOL winemem_query_limits(HANDLE job, JOBOBJECT_EXTENDED_LIMIT_INFORMATION *info)
{
	LONG i;

	if (table == NULL || owned == 0)
		return FALSE;
	lock();
	i = job_of(job);
	if (i >= 0) {
		IO_COUNTERS io = info->IoInfo;

		*info = table->jobs[i].info;
		info->IoInfo = io;
		info->PeakProcessMemoryUsed = (SIZE_T)table->jobs[i].peak_process;
		info->PeakJobMemoryUsed = (SIZE_T)table->jobs[i].peak_job;
	}
	unlock();
	return i >= 0;
}

void winemem_assign(HANDLE job, HANDLE process)
{
	LONG i;

	if (table == NULL || owned == 0)
		return;
	lock();
	i = job_of(job);
	if (i >= 0) {
		add_proc(GetProcessId(process), process_created(process), i);
		InterlockedIncrement(&table->generation);
	}
	unlock();
}

void winemem_close(HANDLE h)
{
	LONG i;

	if (table == NULL || owned == 0)
		return;
	lock();
	i = job_of(h);
	if (i >= 0) {
		table->jobs[i].owner_pid = 0; /* kept while its processes live */
		InterlockedDecrement(&owned);
	}
	unlock();
}

void winemem_detach(void)
{
	if (table == NULL || self_slot < 0)
		return;
	lock();
	if (table->procs[self_slot].pid == self_pid)
		ZeroMemory(&table->procs[self_slot], sizeof(table->procs[self_slot]));
	unlock();
}

BOOL winemem_install(void)
{
	HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
	BYTE *kernelbase = (BYTE *)GetModuleHandleW(L"kernelbase.dll");
	HANDLE section;

	if (ntdll == NULL || kernelbase == NULL)
		return FALSE;
	real_allocate = (allocate_fn)(void *)GetProcAddress(ntdll, "NtAllocateVirtualMemory");
	real_allocate_ex = (allocate_ex_fn)(void *)GetProcAddress(ntdll, "NtAllocateVirtualMemoryEx");
	real_free = (free_fn)(void *)GetProcAddress(ntdll, "NtFreeVirtualMemory");
	nt_close = (close_fn)(void *)GetProcAddress(ntdll, "NtClose");
	query_process = (query_process_fn)(void *)GetProcAddress(ntdll, "NtQueryInformationProcess");
	if (real_allocate == NULL || real_allocate_ex == NULL || real_free == NULL || nt_close == NULL)
		return FALSE;
	section = CreateFileMappingW(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE, 0, sizeof(struct mem_table),
				     L"Global\\runhcs-wine-jobmem-1");
	if (section == NULL)
		return FALSE;
	table = MapViewOfFile(section, FILE_MAP_ALL_ACCESS, 0, 0, sizeof(struct mem_table));
	table_lock = CreateMutexW(NULL, FALSE, L"Global\\runhcs-wine-jobmem-1-lock");
	if (table == NULL || table_lock == NULL) {
		table = NULL;
		return FALSE;
	}
	self_pid = GetCurrentProcessId();
	self_created = process_created(GetCurrentProcess());
	bind_self();
	return winecompat_patch_import(kernelbase, "ntdll.dll", "NtAllocateVirtualMemory", (void *)mem_allocate) &&
	       winecompat_patch_import(kernelbase, "ntdll.dll", "NtAllocateVirtualMemoryEx", (void *)mem_allocate_ex) &&
	       winecompat_patch_import(kernelbase, "ntdll.dll", "NtFreeVirtualMemory", (void *)mem_free);
}
