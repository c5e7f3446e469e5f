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
 * loses the link (unlinkat), anything else goes to Wine's. A handle-based delete (Go's
 * os.RemoveAll: NtOpenFile with FILE_OPEN_REPARSE_POINT, then a delete disposition) is below,
 * with the other reparse-point calls.
 */
#include <windows.h>
#include <winternl.h>

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

#define linux_syscall4 winecompat_linux_syscall4

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

/*
 * Links as reparse points. Windows reports a symbolic link as a reparse point
 * (FILE_ATTRIBUTE_REPARSE_POINT, tag IO_REPARSE_TAG_SYMLINK) and opens the link itself, not its
 * target, when asked to (CreateFileW's FILE_FLAG_OPEN_REPARSE_POINT, NtOpenFile's
 * FILE_OPEN_REPARSE_POINT); FSCTL_GET_REPARSE_POINT on such a handle gives the target, and a
 * delete disposition on it deletes the link (learn.microsoft.com: "Symbolic Link Effects on File
 * Systems Functions", FSCTL_GET_REPARSE_POINT, REPARSE_DATA_BUFFER). Wine 8 reports a Unix link
 * as its target and opens the target, so Go's os.Readlink failed with ERROR_NOT_A_REPARSE_POINT
 * (4390), os.Lstat saw a folder, and os.RemoveAll went through a folder link into its target
 * (observed: kubelet's projected volumes, whose AtomicWriter keeps ..data as a link to a
 * timestamped folder, failed every update with "error reading link for data directory" and
 * their teardown deleted the target's files and then failed on the dangling links, "Directory
 * is not empty", so no pod could be deleted).
 *
 * The fix, for the calls Go makes (each an export it finds with GetProcAddress):
 * - GetFileAttributesExW adds FILE_ATTRIBUTE_REPARSE_POINT for a Unix link (and answers for a
 *   dangling one, which Wine cannot open);
 * - CreateFileW with FILE_FLAG_OPEN_REPARSE_POINT, and NtOpenFile with FILE_OPEN_REPARSE_POINT,
 *   on a Unix link return Wine's handle on the target, or, for a dangling link, a handle on the
 *   link's folder, and remember that the handle stands for the link;
 * - on such a handle, GetFileInformationByHandle adds the reparse attribute,
 *   GetFileInformationByHandleEx(FileAttributeTagInfo) gives IO_REPARSE_TAG_SYMLINK,
 *   DeviceIoControl(FSCTL_GET_REPARSE_POINT) gives a symbolic link's REPARSE_DATA_BUFFER built
 *   from readlink(2) (a relative target with SYMLINK_FLAG_RELATIVE), and a delete disposition
 *   (NtSetInformationFile, winecompat.c; SetFileInformationByHandle) removes the link with
 *   unlinkat(2) at once;
 * - CloseHandle forgets the handle.
 * Not covered: directory listings (FindFirstFileW, FileIdBothDirectoryInfo) still show a link as
 * its target's kind. Tested in internal/wintest, TestSymlink.
 */
#define LINUX_SYS_READLINKAT 267
#define LINUX_S_IFDIR 0040000
#define IO_REPARSE_TAG_SYMLINK_ 0xA000000CUL
#define FSCTL_GET_REPARSE_POINT_ 0x000900A8UL
#define SYMLINK_FLAG_RELATIVE_ 0x1
#define FILE_OPEN_REPARSE_POINT_ 0x00200000UL
#define FILE_ATTRIBUTE_TAG_INFO_CLASS 9
#define STATUS_SUCCESS_ ((NTSTATUS)0)

typedef struct {
	ULONG ReparseTag;
	USHORT ReparseDataLength;
	USHORT Reserved;
	USHORT SubstituteNameOffset;
	USHORT SubstituteNameLength;
	USHORT PrintNameOffset;
	USHORT PrintNameLength;
	ULONG Flags;
	WCHAR PathBuffer[1];
} symlink_reparse_buffer;

typedef LPWSTR(CDECL *dos_name_fn)(const char *unix_path);
typedef HANDLE(WINAPI *create_file_w_fn)(LPCWSTR, DWORD, DWORD, LPSECURITY_ATTRIBUTES, DWORD, DWORD, HANDLE);
typedef BOOL(WINAPI *get_attributes_ex_w_fn)(LPCWSTR, GET_FILEEX_INFO_LEVELS, LPVOID);
typedef BOOL(WINAPI *get_info_by_handle_fn)(HANDLE, LPBY_HANDLE_FILE_INFORMATION);
typedef BOOL(WINAPI *get_info_by_handle_ex_fn)(HANDLE, FILE_INFO_BY_HANDLE_CLASS, LPVOID, DWORD);
typedef BOOL(WINAPI *device_io_control_fn)(HANDLE, DWORD, LPVOID, DWORD, LPVOID, DWORD, LPDWORD, LPOVERLAPPED);
typedef BOOL(WINAPI *close_handle_fn)(HANDLE);
typedef NTSTATUS(NTAPI *nt_open_file_fn)(PHANDLE, ACCESS_MASK, POBJECT_ATTRIBUTES, PIO_STATUS_BLOCK, ULONG, ULONG);

static dos_name_fn dos_name;
static create_file_w_fn real_create_file_w;
static get_attributes_ex_w_fn real_get_attributes_ex_w;
static get_info_by_handle_fn real_get_info_by_handle;
static get_info_by_handle_ex_fn real_get_info_by_handle_ex;
static device_io_control_fn real_device_io_control;
static close_handle_fn real_close_handle;
static nt_open_file_fn real_nt_open_file;

/* The handles that stand for a link: the link's Unix path, from the process heap. */
struct link_handle {
	struct link_handle *next;
	HANDLE h;
	char *upath;
};

static CRITICAL_SECTION links_lock;
static struct link_handle *links;

static void track_link(HANDLE h, char *upath)
{
	struct link_handle *l = HeapAlloc(GetProcessHeap(), 0, sizeof(*l));

	if (l == NULL) {
		HeapFree(GetProcessHeap(), 0, upath);
		return;
	}
	l->h = h;
	l->upath = upath;
	EnterCriticalSection(&links_lock);
	l->next = links;
	links = l;
	LeaveCriticalSection(&links_lock);
}

/* link_of copies the Unix path of the link h stands for into buf; FALSE if h stands for none. */
static BOOL link_of(HANDLE h, char *buf, size_t n)
{
	struct link_handle *l;
	BOOL found = FALSE;

	EnterCriticalSection(&links_lock);
	for (l = links; l != NULL; l = l->next) {
		if (l->h == h && lstrlenA(l->upath) < (int)n) {
			lstrcpyA(buf, l->upath);
			found = TRUE;
			break;
		}
	}
	LeaveCriticalSection(&links_lock);
	return found;
}

static BOOL WINAPI compat_close_handle(HANDLE h)
{
	struct link_handle *l, **p;

	EnterCriticalSection(&links_lock);
	for (p = &links; (l = *p) != NULL; p = &l->next) {
		if (l->h == h) {
			*p = l->next;
			HeapFree(GetProcessHeap(), 0, l->upath);
			HeapFree(GetProcessHeap(), 0, l);
			break;
		}
	}
	LeaveCriticalSection(&links_lock);
	return real_close_handle(h);
}

/* target_is_dir says whether the link at upath leads to a folder (stat, following it). */
static BOOL target_is_dir(const char *upath)
{
	unsigned char st[256];

	if (linux_syscall4(LINUX_SYS_NEWFSTATAT, LINUX_AT_FDCWD, (LONG_PTR)upath, (LONG_PTR)st, 0) != 0)
		return FALSE;
	return (*(unsigned int *)(st + LINUX_STAT_MODE_OFFSET) & LINUX_S_IFMT) == LINUX_S_IFDIR;
}

/* link_attributes are the attributes Windows gives a symbolic link: a reparse point, a folder
 * if it leads to one (Windows keeps the kind the link was made as; Unix links have none, so its
 * target's kind stands in). */
static DWORD link_attributes(const char *upath)
{
	return FILE_ATTRIBUTE_REPARSE_POINT | (target_is_dir(upath) ? FILE_ATTRIBUTE_DIRECTORY : 0);
}

/* unix_link_path returns the Unix path of the Windows path p if it is a Unix link, else NULL. */
static char *unix_link_path(LPCWSTR p)
{
	char *upath = p != NULL && p[0] != 0 ? unix_path_of(p) : NULL;

	if (upath != NULL && !is_unix_link(upath)) {
		HeapFree(GetProcessHeap(), 0, upath);
		upath = NULL;
	}
	return upath;
}

/* parent_handle opens the folder holding the Windows path p (a stand-in handle for a dangling
 * link). */
static HANDLE parent_handle(LPCWSTR p)
{
	WCHAR full[MAX_PATH * 4];
	DWORD n = GetFullPathNameW(p, sizeof(full) / sizeof(full[0]), full, NULL);

	if (n == 0 || n >= sizeof(full) / sizeof(full[0]))
		return INVALID_HANDLE_VALUE;
	while (n > 0 && full[n - 1] != L'\\')
		n--;
	if (n == 0)
		return INVALID_HANDLE_VALUE;
	full[n > 3 ? n - 1 : n] = 0; /* keep C:\ */
	return real_create_file_w(full, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
				  FILE_FLAG_BACKUP_SEMANTICS, NULL);
}

static BOOL WINAPI compat_get_attributes_ex_w(LPCWSTR name, GET_FILEEX_INFO_LEVELS level, LPVOID info)
{
	BOOL ok = real_get_attributes_ex_w(name, level, info);
	DWORD err = GetLastError();
	WIN32_FILE_ATTRIBUTE_DATA *d = info;
	char *upath;

	if (level != GetFileExInfoStandard || info == NULL ||
	    (!ok && err != ERROR_FILE_NOT_FOUND && err != ERROR_PATH_NOT_FOUND))
		return ok;
	upath = unix_link_path(name);
	if (upath == NULL) {
		SetLastError(err);
		return ok;
	}
	if (!ok)
		ZeroMemory(d, sizeof(*d));
	d->dwFileAttributes = (ok ? d->dwFileAttributes & ~(DWORD)FILE_ATTRIBUTE_DIRECTORY : 0) | link_attributes(upath);
	HeapFree(GetProcessHeap(), 0, upath);
	return TRUE;
}

static HANDLE WINAPI compat_create_file_w(LPCWSTR name, DWORD access, DWORD share, LPSECURITY_ATTRIBUTES sa,
					  DWORD disposition, DWORD flags, HANDLE tmpl)
{
	char *upath;
	HANDLE h;

	if (!(flags & FILE_FLAG_OPEN_REPARSE_POINT) || disposition != OPEN_EXISTING ||
	    (upath = unix_link_path(name)) == NULL)
		return real_create_file_w(name, access, share, sa, disposition, flags, tmpl);
	h = real_create_file_w(name, access, share, sa, disposition, flags, tmpl);
	if (h == INVALID_HANDLE_VALUE)
		h = parent_handle(name);
	if (h == INVALID_HANDLE_VALUE) {
		HeapFree(GetProcessHeap(), 0, upath);
		SetLastError(ERROR_FILE_NOT_FOUND);
		return h;
	}
	track_link(h, upath);
	SetLastError(0);
	return h;
}

/* nt_dos_path writes the Windows path oa names (its root folder's path and its name, or an NT
 * path \??\X:\…) into buf; FALSE if it cannot. */
static BOOL nt_dos_path(POBJECT_ATTRIBUTES oa, WCHAR *buf, DWORD n)
{
	DWORD len = 0, name_len;
	const WCHAR *name;

	if (oa == NULL || oa->ObjectName == NULL || oa->ObjectName->Buffer == NULL)
		return FALSE;
	name = oa->ObjectName->Buffer;
	name_len = oa->ObjectName->Length / sizeof(WCHAR);
	if (oa->RootDirectory != NULL) {
		len = GetFinalPathNameByHandleW(oa->RootDirectory, buf, n, 0 /* FILE_NAME_NORMALIZED|VOLUME_NAME_DOS */);
		if (len == 0 || len + name_len + 2 >= n)
			return FALSE;
		if (len > 0 && buf[len - 1] != L'\\')
			buf[len++] = L'\\';
	} else {
		if (name_len < 4 || name[0] != L'\\' || name[1] != L'?' || name[2] != L'?' || name[3] != L'\\' ||
		    name_len + 1 >= n)
			return FALSE;
		name += 4;
		name_len -= 4;
	}
	CopyMemory(buf + len, name, name_len * sizeof(WCHAR));
	buf[len + name_len] = 0;
	return TRUE;
}

static NTSTATUS NTAPI compat_nt_open_file(PHANDLE h, ACCESS_MASK access, POBJECT_ATTRIBUTES oa, PIO_STATUS_BLOCK io,
					  ULONG share, ULONG options)
{
	WCHAR path[MAX_PATH * 4];
	char *upath;
	NTSTATUS status;

	if (!(options & FILE_OPEN_REPARSE_POINT_) || h == NULL || !nt_dos_path(oa, path, sizeof(path) / sizeof(path[0])) ||
	    (upath = unix_link_path(path)) == NULL)
		return real_nt_open_file(h, access, oa, io, share, options);
	status = real_nt_open_file(h, access, oa, io, share, options);
	if (status < 0) {
		*h = parent_handle(path);
		if (*h == INVALID_HANDLE_VALUE) {
			*h = NULL;
			HeapFree(GetProcessHeap(), 0, upath);
			return status;
		}
		status = STATUS_SUCCESS_;
		if (io != NULL) {
			io->Status = STATUS_SUCCESS_;
			io->Information = FILE_OPEN;
		}
	}
	track_link(*h, upath);
	return status;
}

static BOOL WINAPI compat_get_info_by_handle(HANDLE h, LPBY_HANDLE_FILE_INFORMATION info)
{
	char upath[MAX_PATH * 4];
	BOOL ok = real_get_info_by_handle(h, info);

	if (ok && info != NULL && link_of(h, upath, sizeof(upath))) {
		info->dwFileAttributes = (info->dwFileAttributes & ~(DWORD)FILE_ATTRIBUTE_DIRECTORY) | link_attributes(upath);
		if (!target_is_dir(upath) && !(info->dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
			info->nFileSizeHigh = info->nFileSizeLow = 0;
	}
	return ok;
}

static BOOL WINAPI compat_get_info_by_handle_ex(HANDLE h, FILE_INFO_BY_HANDLE_CLASS cls, LPVOID info, DWORD size)
{
	char upath[MAX_PATH * 4];

	if ((int)cls == FILE_ATTRIBUTE_TAG_INFO_CLASS && info != NULL && size >= 2 * sizeof(DWORD) &&
	    link_of(h, upath, sizeof(upath))) {
		((DWORD *)info)[0] = link_attributes(upath);
		((DWORD *)info)[1] = IO_REPARSE_TAG_SYMLINK_;
		return TRUE;
	}
	return real_get_info_by_handle_ex(h, cls, info, size);
}

/* link_reparse_data fills out with the symbolic link reparse buffer of the link at upath. */
static BOOL link_reparse_data(const char *upath, LPVOID out, DWORD size, LPDWORD returned)
{
	char target[MAX_PATH * 4];
	WCHAR wtarget[MAX_PATH * 4], *dos = NULL;
	const WCHAR *print;
	WCHAR subst[MAX_PATH * 4 + 8];
	LONG_PTR n = linux_syscall4(LINUX_SYS_READLINKAT, LINUX_AT_FDCWD, (LONG_PTR)upath, (LONG_PTR)target, sizeof(target) - 1);
	symlink_reparse_buffer *rb = out;
	DWORD plen, slen, need, i;
	BOOL relative;

	if (n <= 0) {
		SetLastError(ERROR_NOT_A_REPARSE_POINT);
		return FALSE;
	}
	target[n] = 0;
	relative = target[0] != '/';
	if (relative) {
		if (MultiByteToWideChar(CP_UTF8, 0, target, -1, wtarget, sizeof(wtarget) / sizeof(wtarget[0])) == 0) {
			SetLastError(ERROR_INVALID_REPARSE_DATA);
			return FALSE;
		}
		for (i = 0; wtarget[i] != 0; i++)
			if (wtarget[i] == L'/')
				wtarget[i] = L'\\';
		print = wtarget;
		lstrcpyW(subst, wtarget);
	} else {
		dos = dos_name(target); /* \\?\X:\… or X:\… */
		if (dos == NULL) {
			SetLastError(ERROR_INVALID_REPARSE_DATA);
			return FALSE;
		}
		print = dos;
		if (print[0] == L'\\' && print[1] == L'\\' && print[2] == L'?' && print[3] == L'\\')
			print += 4;
		lstrcpyW(subst, L"\\??\\");
		lstrcatW(subst, print);
	}
	slen = lstrlenW(subst) * sizeof(WCHAR);
	plen = lstrlenW(print) * sizeof(WCHAR);
	need = FIELD_OFFSET(symlink_reparse_buffer, PathBuffer) + slen + plen;
	if (out == NULL || size < need) {
		if (dos != NULL)
			HeapFree(GetProcessHeap(), 0, dos);
		SetLastError(ERROR_INSUFFICIENT_BUFFER);
		return FALSE;
	}
	rb->ReparseTag = IO_REPARSE_TAG_SYMLINK_;
	rb->ReparseDataLength = (USHORT)(need - FIELD_OFFSET(symlink_reparse_buffer, SubstituteNameOffset));
	rb->Reserved = 0;
	rb->SubstituteNameOffset = 0;
	rb->SubstituteNameLength = (USHORT)slen;
	rb->PrintNameOffset = (USHORT)slen;
	rb->PrintNameLength = (USHORT)plen;
	rb->Flags = relative ? SYMLINK_FLAG_RELATIVE_ : 0;
	CopyMemory(rb->PathBuffer, subst, slen);
	CopyMemory((BYTE *)rb->PathBuffer + slen, print, plen);
	if (returned != NULL)
		*returned = need;
	if (dos != NULL)
		HeapFree(GetProcessHeap(), 0, dos);
	return TRUE;
}

static BOOL WINAPI compat_device_io_control(HANDLE h, DWORD code, LPVOID in, DWORD in_size, LPVOID out, DWORD out_size,
					    LPDWORD returned, LPOVERLAPPED ov)
{
	char upath[MAX_PATH * 4];

	if (code == FSCTL_GET_REPARSE_POINT_ && ov == NULL && link_of(h, upath, sizeof(upath)))
		return link_reparse_data(upath, out, out_size, returned);
	return real_device_io_control(h, code, in, in_size, out, out_size, returned, ov);
}

BOOL winesymlink_dispose(HANDLE h, BOOL del, NTSTATUS *status)
{
	char upath[MAX_PATH * 4];
	LONG_PTR ret;

	if (!link_of(h, upath, sizeof(upath)))
		return FALSE;
	if (!del) {
		*status = STATUS_SUCCESS_;
		return TRUE;
	}
	if (!is_unix_link(upath)) {
		*status = STATUS_SUCCESS_; /* gone already; never pass on: the handle may be the folder's */
		return TRUE;
	}
	ret = linux_syscall4(LINUX_SYS_UNLINKAT, LINUX_AT_FDCWD, (LONG_PTR)upath, 0, 0);
	*status = ret == 0 ? STATUS_SUCCESS_ : (NTSTATUS)0xC0000022L /* STATUS_ACCESS_DENIED */;
	return TRUE;
}

/*
 * Dangling links in a folder being deleted. Wine 8 leaves a Unix link whose target is missing
 * out of directory listings (observed: cmd's dir and Go's Readdirnames do not show it), so a
 * caller that empties a folder before deleting it, as Go's os.RemoveAll does, never sees such a
 * link, and the folder's delete fails with STATUS_DIRECTORY_NOT_EMPTY. Windows lists a dangling
 * link like any other and the caller removes it. So when a folder's delete disposition fails
 * so, the dangling links in it are removed and the delete is tried again, once (winecompat.c);
 * if anything else is in the folder it still fails. Deviation, accepted: a folder holding only
 * dangling links is deleted without its caller having removed them.
 */
#define LINUX_SYS_CLOSE 3
#define LINUX_SYS_GETDENTS64 217
#define LINUX_SYS_OPENAT 257
#define LINUX_O_RDONLY_DIRECTORY 0200000

BOOL winesymlink_clear_dangling(HANDLE dir)
{
	WCHAR path[MAX_PATH * 4];
	char *udir, name[MAX_PATH * 4];
	unsigned char st[256];
	union {
		unsigned char b[4096];
		ULONGLONG align;
	} buf;
	LONG_PTR fd, n, off;
	BOOL removed = FALSE;
	DWORD len = GetFinalPathNameByHandleW(dir, path, sizeof(path) / sizeof(path[0]), 0);

	if (len == 0 || len >= sizeof(path) / sizeof(path[0]) || (udir = unix_name(path)) == NULL)
		return FALSE;
	fd = linux_syscall4(LINUX_SYS_OPENAT, LINUX_AT_FDCWD, (LONG_PTR)udir, LINUX_O_RDONLY_DIRECTORY, 0);
	HeapFree(GetProcessHeap(), 0, udir);
	if (fd < 0)
		return FALSE;
	while ((n = linux_syscall4(LINUX_SYS_GETDENTS64, fd, (LONG_PTR)buf.b, sizeof(buf.b), 0)) > 0) {
		for (off = 0; off < n;) {
			/* struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name */
			unsigned short reclen = *(unsigned short *)(buf.b + off + 16);
			const char *d_name = (const char *)(buf.b + off + 19);

			off += reclen;
			if (lstrcmpA(d_name, ".") == 0 || lstrcmpA(d_name, "..") == 0 || lstrlenA(d_name) >= (int)sizeof(name))
				continue;
			lstrcpyA(name, d_name);
			if (linux_syscall4(LINUX_SYS_NEWFSTATAT, fd, (LONG_PTR)name, (LONG_PTR)st, LINUX_AT_SYMLINK_NOFOLLOW) != 0 ||
			    (*(unsigned int *)(st + LINUX_STAT_MODE_OFFSET) & LINUX_S_IFMT) != LINUX_S_IFLNK)
				continue;
			if (linux_syscall4(LINUX_SYS_NEWFSTATAT, fd, (LONG_PTR)name, (LONG_PTR)st, 0) != -LINUX_ENOENT)
				continue; /* leads somewhere: Wine lists it, the caller removes it */
			if (linux_syscall4(LINUX_SYS_UNLINKAT, fd, (LONG_PTR)name, 0, 0) == 0)
				removed = TRUE;
		}
	}
	linux_syscall4(LINUX_SYS_CLOSE, fd, 0, 0, 0);
	return removed;
}

typedef BOOL(WINAPI *set_info_by_handle_fn)(HANDLE, FILE_INFO_BY_HANDLE_CLASS, LPVOID, DWORD);

static set_info_by_handle_fn real_set_info_by_handle;

/* SetFileInformationByHandle(FileDispositionInfo), Go's fallback when the NT call with
 * FileDispositionInformationEx is refused (kernelbase calls NtSetInformationFile inside Wine,
 * past winecompat.c's wrapper): the same two rules, a link's handle deletes the link, a folder
 * whose only entries are dangling links is deleted. */
static BOOL WINAPI compat_set_info_by_handle(HANDLE h, FILE_INFO_BY_HANDLE_CLASS cls, LPVOID info, DWORD size)
{
	NTSTATUS status;
	BOOL ok;

	if (cls != FileDispositionInfo || info == NULL || size < sizeof(BOOLEAN))
		return real_set_info_by_handle(h, cls, info, size);
	if (winesymlink_dispose(h, *(BOOLEAN *)info != 0, &status)) {
		if (status != STATUS_SUCCESS_)
			SetLastError(ERROR_ACCESS_DENIED);
		return status == STATUS_SUCCESS_;
	}
	ok = real_set_info_by_handle(h, cls, info, size);
	if (!ok && GetLastError() == ERROR_DIR_NOT_EMPTY && *(BOOLEAN *)info && winesymlink_clear_dangling(h))
		ok = real_set_info_by_handle(h, cls, info, size);
	return ok;
}

BOOL winesymlink_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll"), ntdll = GetModuleHandleW(L"ntdll.dll");

	if (kernel32 == NULL || ntdll == NULL)
		return FALSE;
	unix_name = (unix_name_fn)(void *)GetProcAddress(kernel32, "wine_get_unix_file_name");
	if (unix_name == NULL)
		return FALSE;
	real_remove_directory_w = (delete_path_w_fn)(void *)GetProcAddress(kernel32, "RemoveDirectoryW");
	real_delete_file_w = (delete_path_w_fn)(void *)GetProcAddress(kernel32, "DeleteFileW");
	if (real_remove_directory_w == NULL || real_delete_file_w == NULL)
		return FALSE;
	dos_name = (dos_name_fn)(void *)GetProcAddress(kernel32, "wine_get_dos_file_name");
	real_create_file_w = (create_file_w_fn)(void *)GetProcAddress(kernel32, "CreateFileW");
	real_get_attributes_ex_w = (get_attributes_ex_w_fn)(void *)GetProcAddress(kernel32, "GetFileAttributesExW");
	real_get_info_by_handle = (get_info_by_handle_fn)(void *)GetProcAddress(kernel32, "GetFileInformationByHandle");
	real_get_info_by_handle_ex = (get_info_by_handle_ex_fn)(void *)GetProcAddress(kernel32, "GetFileInformationByHandleEx");
	real_device_io_control = (device_io_control_fn)(void *)GetProcAddress(kernel32, "DeviceIoControl");
	real_close_handle = (close_handle_fn)(void *)GetProcAddress(kernel32, "CloseHandle");
	real_set_info_by_handle = (set_info_by_handle_fn)(void *)GetProcAddress(kernel32, "SetFileInformationByHandle");
	real_nt_open_file = (nt_open_file_fn)(void *)GetProcAddress(ntdll, "NtOpenFile");
	if (!dos_name || !real_create_file_w || !real_get_attributes_ex_w || !real_get_info_by_handle ||
	    !real_get_info_by_handle_ex || !real_device_io_control || !real_close_handle || !real_nt_open_file || !real_set_info_by_handle)
		return FALSE;
	InitializeCriticalSection(&links_lock);
	return winecompat_patch_export((BYTE *)kernel32, "CreateSymbolicLinkW", (void *)compat_create_symbolic_link_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "RemoveDirectoryW", (void *)compat_remove_directory_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "DeleteFileW", (void *)compat_delete_file_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "CreateFileW", (void *)compat_create_file_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "GetFileAttributesExW", (void *)compat_get_attributes_ex_w) &&
	       winecompat_patch_export((BYTE *)kernel32, "GetFileInformationByHandle", (void *)compat_get_info_by_handle) &&
	       winecompat_patch_export((BYTE *)kernel32, "GetFileInformationByHandleEx", (void *)compat_get_info_by_handle_ex) &&
	       winecompat_patch_export((BYTE *)kernel32, "DeviceIoControl", (void *)compat_device_io_control) &&
	       winecompat_patch_export((BYTE *)kernel32, "CloseHandle", (void *)compat_close_handle) &&
	       winecompat_patch_export((BYTE *)kernel32, "SetFileInformationByHandle", (void *)compat_set_info_by_handle) &&
	       winecompat_patch_export((BYTE *)ntdll, "NtOpenFile", (void *)compat_nt_open_file);
}
