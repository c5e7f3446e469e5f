/*
 * winectrl.c: GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, 0), which Wine 8 cannot generate.
 * Installed by winecompat_install (winecompat.c) under Wine only, in place of kernel32's export.
 *
 * What Windows does: GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, 0) runs the control handlers of
 * every process attached to the caller's console, the caller included; a process whose handlers
 * all return FALSE ends with STATUS_CONTROL_C_EXIT (learn.microsoft.com, "GenerateConsoleCtrlEvent
 * function" and "HandlerRoutine callback function"). The shim signals a HostProcess container's
 * processes so (internal/hostprocess process_windows.go Signal): it attaches to the process's
 * console (AttachConsole) and generates CTRL_C_EVENT for SIGINT and CTRL_BREAK_EVENT for SIGTERM.
 *
 * What Wine 8 does: CTRL_C_EVENT works (the console server sends SIGINT to each process of the
 * console, whose ntdll then runs kernelbase's CtrlRoutine(CTRL_C_EVENT) in a new thread), but any
 * other event is refused by the server (server/console.c propagate_console_signal: "FIXME: should
 * support the other events (like CTRL_BREAK)", STATUS_NOT_IMPLEMENTED), and the call fails with
 * ERROR_INVALID_HANDLE ("Invalid handle."). A HostProcess container's SIGTERM, so a pod's graceful
 * stop, failed on the node.
 *
 * The fill: for CTRL_BREAK_EVENT with group 0, the processes of the caller's console are listed
 * (GetConsoleProcessList, which Wine 8 answers) and each runs CtrlRoutine(CTRL_BREAK_EVENT) in a
 * thread made by CreateRemoteThread, as Wine's own SIGINT path runs CtrlRoutine(CTRL_C_EVENT).
 * CtrlRoutine's address is taken from this process's kernelbase.dll; Wine loads its builtin
 * kernelbase at the same base in every process, and the fill checks the target's first bytes
 * there against its own before starting the thread (ERROR_NOT_SUPPORTED if they differ).
 * Deviations: a process that cannot be opened is skipped, as it could not have been reached by
 * a signal either; a nonzero group is left to Wine (it fails as before: the shim does not use it).
 * Every other event and CTRL_C_EVENT go to Wine's own function.
 *
 * Go programs find GenerateConsoleCtrlEvent with GetProcAddress (x/sys/windows' lazy kernel32
 * procs), which reads kernel32's export table. Tested in internal/wintest TestConsoleCtrlEvents.
 */
#include <windows.h>

#include "winecompat.h"

typedef BOOL(WINAPI *generate_ctrl_event_fn)(DWORD event, DWORD group);
typedef DWORD(WINAPI *get_console_process_list_fn)(LPDWORD pids, DWORD count);

static generate_ctrl_event_fn real_generate_ctrl_event;
static get_console_process_list_fn get_console_process_list;
static LPTHREAD_START_ROUTINE ctrl_routine;

/* CTRL_ROUTINE_CHECK is how many of CtrlRoutine's first bytes must match in the target. */
#define CTRL_ROUTINE_CHECK 16

/* signal_process runs CtrlRoutine(event) in process pid; FALSE with the last error if it could not. */
static BOOL signal_process(DWORD pid, DWORD event)
{
	BYTE theirs[CTRL_ROUTINE_CHECK];
	SIZE_T n = 0;
	HANDLE process, thread;
	BOOL ok = FALSE;

	process = OpenProcess(PROCESS_CREATE_THREAD | PROCESS_QUERY_INFORMATION | PROCESS_VM_OPERATION |
				      PROCESS_VM_WRITE | PROCESS_VM_READ,
			      FALSE, pid);
	if (process == NULL)
		return FALSE;
	if (!ReadProcessMemory(process, (LPCVOID)ctrl_routine, theirs, sizeof(theirs), &n) || n != sizeof(theirs) ||
	    memcmp(theirs, (const void *)ctrl_routine, sizeof(theirs)) != 0) {
		SetLastError(ERROR_NOT_SUPPORTED);
	} else {
		thread = CreateRemoteThread(process, NULL, 0, ctrl_routine, (LPVOID)(ULONG_PTR)event, 0, NULL);
		if (thread != NULL) {
			CloseHandle(thread);
			ok = TRUE;
		}
	}
	CloseHandle(process);
	return ok;
}

static BOOL WINAPI compat_generate_ctrl_event(DWORD event, DWORD group)
{
	DWORD pids[64], *list = pids, n, i, err = ERROR_SUCCESS;
	BOOL any = FALSE;

	if (event != CTRL_BREAK_EVENT || group != 0)
		return real_generate_ctrl_event(event, group);
	n = get_console_process_list(pids, ARRAYSIZE(pids));
	if (n == 0)
		/* No console: Wine's own answer is Windows' (ERROR_INVALID_HANDLE). */
		return real_generate_ctrl_event(event, group);
	if (n > ARRAYSIZE(pids)) {
		list = HeapAlloc(GetProcessHeap(), 0, n * sizeof(DWORD));
		if (list == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		n = get_console_process_list(list, n);
	}
	for (i = 0; i < n; i++) {
		if (signal_process(list[i], event)) {
			any = TRUE;
			continue;
		}
		if (err == ERROR_SUCCESS)
			err = GetLastError();
		winecompat_log_error("winectrl (runhcs hack/wine): CTRL_BREAK_EVENT not delivered to process ", list[i],
				     GetLastError());
	}
	if (list != pids)
		HeapFree(GetProcessHeap(), 0, list);
	if (!any) {
		SetLastError(err);
		return FALSE;
	}
	return TRUE;
}

BOOL winectrl_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll"), kernelbase = GetModuleHandleW(L"kernelbase.dll");

	if (kernel32 == NULL || kernelbase == NULL)
		return FALSE;
	real_generate_ctrl_event = (generate_ctrl_event_fn)(void *)GetProcAddress(kernel32, "GenerateConsoleCtrlEvent");
	get_console_process_list =
		(get_console_process_list_fn)(void *)GetProcAddress(kernel32, "GetConsoleProcessList");
	ctrl_routine = (LPTHREAD_START_ROUTINE)(void *)GetProcAddress(kernelbase, "CtrlRoutine");
	if (real_generate_ctrl_event == NULL || get_console_process_list == NULL || ctrl_routine == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)kernel32, "GenerateConsoleCtrlEvent", (void *)compat_generate_ctrl_event);
}
