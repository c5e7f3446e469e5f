/*
 * winespawn.c: CreateProcessW that starts a new process again when Wine 8 could not start it.
 * Installed by winecompat_install (winecompat.c) under Wine only, in place of kernel32's export.
 *
 * What Wine 8 does: now and then a new process dies in Wine's own start-up, before any of the
 * program's code (seen on the node, about once in a thousand starts: the child printed
 * "err:virtual:virtual_alloc_first_teb wine: failed to map the shared user data: c0000018",
 * STATUS_CONFLICTING_ADDRESSES, and called exit(1)). Its parent's NtCreateUserProcess then finds
 * the process ended before it finished initialising, with no exit status, and returns
 * STATUS_INTERNAL_ERROR (Wine's dlls/ntdll/unix/process.c: get_new_process_info answers
 * success 0, exit code 0), so CreateProcessW fails with ERROR_INTERNAL_ERROR ("Internal
 * error."). containerd's CNI DEL failed that way (fork/exec …\host-local.exe: Internal error.).
 *
 * What Windows does: the kernel maps KUSER_SHARED_DATA at 0x7FFE0000 in every process; a
 * CreateProcess of a valid image does not fail at random. Wine reports start-up done to the
 * parent (init_process_done) before the program's first instruction and before any DLL's
 * DllMain (dlls/ntdll/unix/loader.c, start_main_thread, ends with server_init_process_done
 * after loading ntdll), so a process that failed this way has run nothing of the program, and
 * one that ends later has an exit status and is no ERROR_INTERNAL_ERROR: starting it again
 * is what the caller would have got on Windows. Only ERROR_INTERNAL_ERROR is retried, at most
 * SPAWN_ATTEMPTS times in all; any other failure (a missing file, a bad image) is the caller's.
 *
 * Each retry is reported out of band, never on the process's own stdout or stderr: on Windows a
 * CreateProcess that succeeds writes nothing, and a process's output can be its answer. The shim's
 * start action is such a process: containerd reads its combined stdout and stderr as the
 * bootstrap answer (containerd 1.7.35 runtime/v2/binary.go, cmd.CombinedOutput), so a notice
 * there broke a pod's start ("…starting it again\r\n{"version":2,…}: Invalid name."). The
 * notice goes to the file RUNHCS_WINECOMPAT_LOG names, appended, one line per retry with the
 * process id; without it, to OutputDebugString (Wine shows it with WINEDEBUG=+debugstr).
 *
 * Go programs find CreateProcessW with GetProcAddress (syscall's lazy kernel32 procs), which
 * reads kernel32's export table; calls that DLLs bound at load time are untouched.
 *
 * RUNHCS_WINECOMPAT_SPAWN_FAULTS=N, for tests only (internal/wintest TestCreateProcessRetry):
 * the first N calls fail as Wine's would, without starting anything, so the retry can be
 * tested although Wine's own failure cannot be made to happen.
 */
#include <windows.h>

#include "winecompat.h"

#define SPAWN_ATTEMPTS 3

typedef BOOL(WINAPI *create_process_w_fn)(LPCWSTR app, LPWSTR cmdline, LPSECURITY_ATTRIBUTES process_attrs,
					   LPSECURITY_ATTRIBUTES thread_attrs, BOOL inherit, DWORD flags, LPVOID env,
					   LPCWSTR dir, LPSTARTUPINFOW startup, LPPROCESS_INFORMATION info);

static create_process_w_fn real_create_process_w;
static LONG injected_faults;

static const char retry_line[] = "winespawn (runhcs hack/wine): CreateProcessW: Wine could not start the new "
				 "process (ERROR_INTERNAL_ERROR); starting it again";

/* report_retry says that a start is done again, out of band (winecompat_log): see the comment at
 * the top for why never on stdout or stderr. */
static void report_retry(void)
{
	winecompat_log(retry_line);
}

static BOOL WINAPI compat_create_process_w(LPCWSTR app, LPWSTR cmdline, LPSECURITY_ATTRIBUTES process_attrs,
					   LPSECURITY_ATTRIBUTES thread_attrs, BOOL inherit, DWORD flags, LPVOID env,
					   LPCWSTR dir, LPSTARTUPINFOW startup, LPPROCESS_INFORMATION info)
{
	int attempt;

	for (attempt = 1;; attempt++) {
		BOOL ok;

		if (injected_faults > 0 && InterlockedDecrement(&injected_faults) >= 0) {
			SetLastError(ERROR_INTERNAL_ERROR);
			ok = FALSE;
		} else {
			ok = real_create_process_w(app, cmdline, process_attrs, thread_attrs, inherit, flags, env, dir,
						   startup, info);
		}
		if (ok || GetLastError() != ERROR_INTERNAL_ERROR || attempt == SPAWN_ATTEMPTS)
			return ok;
		report_retry();
	}
}

BOOL winespawn_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");
	char buf[16];
	DWORD n, i;

	if (kernel32 == NULL)
		return FALSE;
	real_create_process_w = (create_process_w_fn)(void *)GetProcAddress(kernel32, "CreateProcessW");
	if (real_create_process_w == NULL)
		return FALSE;
	n = GetEnvironmentVariableA("RUNHCS_WINECOMPAT_SPAWN_FAULTS", buf, sizeof(buf));
	if (n > 0 && n < sizeof(buf)) {
		LONG v = 0;

		for (i = 0; i < n && buf[i] >= '0' && buf[i] <= '9' && v < 1000; i++)
			v = v * 10 + (buf[i] - '0');
		injected_faults = v;
	}
	return winecompat_patch_export((BYTE *)kernel32, "CreateProcessW", (void *)compat_create_process_w);
}
