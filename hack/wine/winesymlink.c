/*
 * winesymlink.c: CreateSymbolicLinkW that makes a symbolic link. Installed by
 * winecompat_install (winecompat.c) under Wine only, in place of kernel32's export.
 *
 * What Wine 8 does: CreateSymbolicLinkW is a stub that answers TRUE and makes nothing
 * (observed with Debian 12's Wine 8.0: Go's os.Symlink returned nil, for a folder and for a
 * file, and nothing existed at the link's path). A CRI client that links a folder and mounts
 * the link then has containerd's CRI find no host path, which it creates as an empty folder,
 * so the container saw an empty folder where Windows shows the target's files.
 *
 * What Windows does: the link is a reparse point (IO_REPARSE_TAG_SYMLINK) holding the target
 * as given; opening the link's path opens the target, a relative target relative to the
 * link's folder; SYMBOLIC_LINK_FLAG_DIRECTORY (1) makes a folder link,
 * SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE (2) lets a non-administrator make it in
 * developer mode; an existing name fails with ERROR_ALREADY_EXISTS, a missing folder with
 * ERROR_PATH_NOT_FOUND (learn.microsoft.com, CreateSymbolicLinkW).
 *
 * The fix: a Unix symbolic link at the link's Unix path (wine_get_unix_file_name) to the
 * target's Unix path when the target is absolute (X:\..., \\?\X:\..., \...), or to the target
 * itself with '/' for '\' when it is relative. Wine follows Unix links when it opens a path, so
 * Windows programs under Wine open the target through the link, and so does hcsemu, a Linux
 * daemon, when a container document names the link as a host path. A PE DLL has no libc: the
 * link is made with the symlinkat system call (x86-64 Linux number 266) directly, which Wine 8
 * lets through to Linux (observed). Tested in internal/wintest, TestSymlink.
 *
 * Deleting a link: Windows deletes the link, never its target. Wine 8 opens a Unix link's
 * target, so its DeleteFileW on a file link deleted the target file and left the link, and its
 * RemoveDirectoryW on a folder link removed the target folder when it was empty (and failed
 * with ERROR_DIR_NOT_EMPTY otherwise; both observed). DeleteFileW and RemoveDirectoryW
 * (kernel32's exports, which Go's os.Remove calls) are replaced too: a path that is a Unix link
 * loses the link (unlinkat), anything else goes to Wine's. Not fixed, and to be avoided under Wine: a handle-based delete of a
 * tree holding a folder link, as Go's os.RemoveAll does (NtOpenFile with
 * FILE_OPEN_REPARSE_POINT, then a delete disposition), goes through the link into the target:
 * Wine 8 does not report a Unix link as a reparse point, so the caller takes it for a folder.
 */
#include <windows.h>

#include "winecompat.h"

#define SYMBOLIC_LINK_FLAG_DIRECTORY_ 0x1
#define SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE_ 0x2

#define LINUX_SYS_NEWFSTATAT 262
#define LINUX_SYS_UNLINKAT 263
#define LINUX_SYS_SYMLINKAT 266
#define LINUX_AT_SYMLINK_NOFOLLOW 0x100
#define LINUX_S_IFMT 0170000
#define LINUX_S_IFLNK 0120000
#define LINUX_STAT_MODE_OFFSET 24 /* st_mode in x86-64's struct stat */
#define LINUX_AT_FDCWD ((LONG_PTR)-100)
#define LINUX_EPERM 1
#define LINUX_ENOENT 2
#define LINUX_EACCES 13
#define LINUX_EEXIST 17
#define LINUX_ENOTDIR 20
#define LINUX_EROFS 30
#define LINUX_ENAMETOOLONG 36

typedef char *(CDECL *unix_name_fn)(LPCWSTR dos);

static unix_name_fn unix_name;

/* linux_syscall4 makes a Linux system call (registers are 64-bit: LONG_PTR, since Windows' long
 * is 32): its result, a negated errno on failure. */
static LONG_PTR linux_syscall4(LONG_PTR nr, LONG_PTR a, LONG_PTR b, LONG_PTR c, LONG_PTR d)
{
	LONG_PTR ret;
	register LONG_PTR r10 __asm__("r10") = d;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return ret;
}

/* is_unix_link says whether the Unix path p is a symbolic link (lstat). */
static BOOL is_unix_link(const char *p)
{
	unsigned char st[256];
	unsigned int mode;

	if (linux_syscall4(LINUX_SYS_NEWFSTATAT, LINUX_AT_FDCWD, (LONG_PTR)p, (LONG_PTR)st, LINUX_AT_SYMLINK_NOFOLLOW) != 0)
		return FALSE;
	mode = *(unsigned int *)(st + LINUX_STAT_MODE_OFFSET);
	return (mode & LINUX_S_IFMT) == LINUX_S_IFLNK;
}

/* is_relative says whether a link target is relative to the link's folder: not X:..., not
 * \... (root of the current drive, UNC, \\?\). */
static BOOL is_relative(LPCWSTR p)
{
	if (p[0] == L'\\' || p[0] == L'/')
		return FALSE;
	if (p[0] != 0 && p[1] == L':')
		return FALSE;
	return TRUE;
}

/* unix_path_of returns the Unix path of a Windows path (made absolute first), from the
 * process heap, or NULL. */
static char *unix_path_of(LPCWSTR p)
{
	WCHAR full[MAX_PATH * 4];
	DWORD n = GetFullPathNameW(p, sizeof(full) / sizeof(full[0]), full, NULL);

	if (n == 0 || n >= sizeof(full) / sizeof(full[0]))
		return NULL;
	return unix_name(full);
}

/* relative_target returns a relative target in UTF-8 with '/' for '\', from the process heap,
 * or NULL. */
static char *relative_target(LPCWSTR p)
{
	int n = WideCharToMultiByte(CP_UTF8, 0, p, -1, NULL, 0, NULL, NULL);
	char *s;
	int i;

	if (n <= 0)
		return NULL;
	s = HeapAlloc(GetProcessHeap(), 0, n);
	if (s == NULL)
		return NULL;
	WideCharToMultiByte(CP_UTF8, 0, p, -1, s, n, NULL, NULL);
	for (i = 0; s[i] != 0; i++)
		if (s[i] == '\\')
			s[i] = '/';
	return s;
}

static DWORD win32_error(LONG_PTR negated_errno)
{
	switch (-negated_errno) {
	case LINUX_EEXIST:
		return ERROR_ALREADY_EXISTS;
	case LINUX_ENOENT:
	case LINUX_ENOTDIR:
		return ERROR_PATH_NOT_FOUND;
	case LINUX_EPERM:
	case LINUX_EACCES:
	case LINUX_EROFS:
		return ERROR_ACCESS_DENIED;
	case LINUX_ENAMETOOLONG:
		return ERROR_FILENAME_EXCED_RANGE;
	default:
		return ERROR_GEN_FAILURE;
	}
}

static BOOLEAN WINAPI compat_create_symbolic_link_w(LPCWSTR link, LPCWSTR target, DWORD flags)
{
	char *ulink, *utarget;
	LONG_PTR ret;

	if (link == NULL || target == NULL || link[0] == 0 || target[0] == 0 ||
	    (flags & ~(DWORD)(SYMBOLIC_LINK_FLAG_DIRECTORY_ | SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE_)) != 0) {
		SetLastError(ERROR_INVALID_PARAMETER);
		return FALSE;
	}
	ulink = unix_path_of(link);
	if (ulink == NULL) {
		SetLastError(ERROR_PATH_NOT_FOUND);
		return FALSE;
	}
	utarget = is_relative(target) ? relative_target(target) : unix_path_of(target);
	if (utarget == NULL) {
		HeapFree(GetProcessHeap(), 0, ulink);
		SetLastError(ERROR_PATH_NOT_FOUND);
		return FALSE;
	}
	ret = linux_syscall4(LINUX_SYS_SYMLINKAT, (LONG_PTR)utarget, LINUX_AT_FDCWD, (LONG_PTR)ulink, 0);
	HeapFree(GetProcessHeap(), 0, utarget);
	HeapFree(GetProcessHeap(), 0, ulink);
	if (ret != 0) {
		SetLastError(win32_error(ret));
		return FALSE;
	}
	return TRUE;
}

typedef BOOL(WINAPI *delete_path_w_fn)(LPCWSTR path);

static delete_path_w_fn real_remove_directory_w, real_delete_file_w;

/* delete_link deletes path if it is a Unix link (*done TRUE, the result returned), else sets
 * *done FALSE for the caller to go to Wine's function. */
static BOOL delete_link(LPCWSTR path, BOOL *done)
{
	char *upath = path != NULL && path[0] != 0 ? unix_path_of(path) : NULL;
	LONG_PTR ret;

	*done = FALSE;
	if (upath == NULL || !is_unix_link(upath)) {
		if (upath != NULL)
			HeapFree(GetProcessHeap(), 0, upath);
		return FALSE;
	}
	*done = TRUE;
	ret = linux_syscall4(LINUX_SYS_UNLINKAT, LINUX_AT_FDCWD, (LONG_PTR)upath, 0, 0);
	HeapFree(GetProcessHeap(), 0, upath);
	if (ret != 0) {
		SetLastError(win32_error(ret));
		return FALSE;
	}
	return TRUE;
}

static BOOL WINAPI compat_remove_directory_w(LPCWSTR path)
{
	BOOL done, ok = delete_link(path, &done);

	return done ? ok : real_remove_directory_w(path);
}

static BOOL WINAPI compat_delete_file_w(LPCWSTR path)
{
	BOOL done, ok = delete_link(path, &done);

	return done ? ok : real_delete_file_w(path);
}

BOOL winesymlink_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");

	if (kernel32 == NULL)
		return FALSE;
	unix_name = (unix_name_fn)(void *)GetProcAddress(kernel32, "wine_get_unix_file_name");
	if (unix_name == NULL)
		return FALSE;
	real_remove_directory_w = (delete_path_w_fn)(void *)GetProcAddress(kernel32, "RemoveDirectoryW");
	real_delete_file_w = (delete_path_w_fn)(void *)GetProcAddress(kernel32, "DeleteFileW");
	if (real_remove_directory_w == NULL || real_delete_file_w == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)kernel32, "CreateSymbolicLinkW", (void *)compat_create_symbolic_link_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "RemoveDirectoryW", (void *)compat_remove_directory_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "DeleteFileW", (void *)compat_delete_file_w);
}
