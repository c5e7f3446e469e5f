/* winecompat.h: see winecompat.c. */
#ifndef RUNHCS_WINECOMPAT_H
#define RUNHCS_WINECOMPAT_H

#include <windows.h>

/* winecompat_install patches what Go programs need from Wine 8; FALSE if it could not. */
BOOL winecompat_install(void);

/* winecompat_patch_export points module's export name at wrapper (through a jump stub near the
 * module, as export entries are 32-bit offsets); FALSE if it could not. */
BOOL winecompat_patch_export(BYTE *module, const char *name, void *wrapper);

/* winecompat_patch_import points module's import of name from dll (its import address table
 * entry, bound at load) at wrapper; FALSE if module does not import it. */
BOOL winecompat_patch_import(BYTE *module, const char *dll, const char *name, void *wrapper);

/* winecompat_linux_syscall4 makes a Linux system call from PE code (Wine 8 lets it through;
 * registers are 64-bit: LONG_PTR, since Windows' long is 32): its result, a negated errno on
 * failure. */
LONG_PTR winecompat_linux_syscall4(LONG_PTR nr, LONG_PTR a, LONG_PTR b, LONG_PTR c, LONG_PTR d);

/* winepath_install makes a rooted path that begins with '/' name the current drive's root, as
 * on Windows, not the Linux machine's (winepath.c). */
BOOL winepath_install(void);

/* winebackup_install fills in BackupRead and BackupWrite (winebackup.c). */
BOOL winebackup_install(void);

/* winepipe_install makes pipe instances without data access start disconnected (winepipe.c). */
BOOL winepipe_install(void);

/* winespawn_install makes CreateProcessW start a process again that Wine could not start
 * (winespawn.c). */
BOOL winespawn_install(void);

/* winesymlink_install makes CreateSymbolicLinkW make a link (winesymlink.c). */
BOOL winesymlink_install(void);

/* winesymlink_dispose carries out a delete disposition (del) on a handle that stands for a
 * symbolic link (winesymlink.c): TRUE with *status if h is such a handle. */
BOOL winesymlink_dispose(HANDLE h, BOOL del, NTSTATUS *status);

/* winesymlink_clear_dangling removes the dangling links, which Wine 8 does not list, from the
 * folder dir: TRUE if it removed any (winesymlink.c). */
BOOL winesymlink_clear_dangling(HANDLE dir);

/* winesock_install gives Winsock AF_UNIX stream sockets (winesock.c). */
BOOL winesock_install(void);

/* winejob_install fills in the job object classes a HostProcess job needs (winejob.c). */
BOOL winejob_install(void);

/* winemem_install makes a job's memory limits fail the commits that pass them (winemem.c). */
BOOL winemem_install(void);

/* winemem_set_limits keeps a job's extended limits as set through handle job, with the job's
 * processes so far (pids, or NULL) (winemem.c). */
BOOL winemem_set_limits(HANDLE job, const JOBOBJECT_EXTENDED_LIMIT_INFORMATION *info,
			const JOBOBJECT_BASIC_PROCESS_ID_LIST *pids);

/* winemem_set_weight gives the job's processes (and pids, its processes so far) the CPU weight
 * weight, 1..9, or none (0) (winemem.c). */
BOOL winemem_set_weight(HANDLE job, DWORD weight, const JOBOBJECT_BASIC_PROCESS_ID_LIST *pids);

/* winemem_query_limits fills info with the limits set through handle job and their peaks: FALSE
 * if none were set through it (winemem.c). */
BOOL winemem_query_limits(HANDLE job, JOBOBJECT_EXTENDED_LIMIT_INFORMATION *info);

/* winemem_assign records process as one of job's (winemem.c). */
void winemem_assign(HANDLE job, HANDLE process);

/* winemem_close forgets handle h as the handle limits were set through (winemem.c). */
void winemem_close(HANDLE h);

/* winemem_detach gives back this process's record as it exits (winemem.c). */
void winemem_detach(void);

/* wineaccount_install makes NetLocalGroupGetInfo answer local groups only and LogonUserW log the
 * service accounts on (wineaccount.c). */
BOOL wineaccount_install(void);

/* winecompat_log writes "pid N: text" as a line out of band, never on the process's stdout or
 * stderr (which can be its answer): to the file RUNHCS_WINECOMPAT_LOG names, appended, else to
 * OutputDebugString (winespawn.c says why). */
void winecompat_log(const char *text);

/* winecompat_log_error logs "<what><id>: error <err>". */
void winecompat_log_error(const char *what, unsigned long id, unsigned long err);

/* winectrl_install lets GenerateConsoleCtrlEvent generate CTRL_BREAK_EVENT (winectrl.c). */
BOOL winectrl_install(void);

#endif
