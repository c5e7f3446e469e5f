/*
 * winepath.c: a rooted path that begins with a forward slash is on the current drive, as on
 * Windows, not on the Linux machine.
 *
 * Windows: "If a file name begins with only a disk designator but not the backslash after the
 * colon, it is interpreted as a relative path ... A path is also relative if it ... begins
 * with a single component separator": "\var\log\pods" and "/var/log/pods" (both / and \ are
 * separators) name the folder var\log\pods at the root of the current drive, C:\var\log\pods
 * when the process's current folder is on C: (Microsoft, "Naming Files, Paths, and
 * Namespaces", Fully qualified vs. relative paths; and "File path formats on Windows systems":
 * "A path that begins with a single component separator ... is relative to the root of the
 * current drive"). kubelet.exe and other Windows programs write such paths (Go's os and
 * path/filepath keep a leading / as the rooted path it is on Windows).
 *
 * Wine 8: ntdll's get_full_path_helper (behind RtlGetFullPathName_U, which
 * RtlDosPathNameToNtPathName_U and so every kernelbase file function uses) treats a rooted path
 * whose first character is '/' as a Unix path ("may be a Unix path", dlls/ntdll/path.c): it
 * converts it through \??\unix and answers the Unix path's DOS name, Z:\var\log\pods, the Linux
 * machine's /var/log/pods. Observed under Debian's Wine 8.0 with the current folder C:\:
 * GetFullPathNameW("/tmp/x/sub") gave Z:\tmp\x\sub, and so did a path whose Linux folders did
 * not exist; os.MkdirAll and os.Create then made them on the Linux machine, and C:\tmp\x\sub did
 * not exist. A "\tmp\x\sub" is resolved on the current drive, as on Windows.
 *
 * The fix: ntdll's path conversions are entered with the leading '/' of such a path (one
 * separator, not "//", which is a UNC path on both) turned into '\', which is the same path on
 * Windows and which Wine then resolves on the current drive. The entries are
 * RtlGetFullPathName_U(_UEx) and RtlDosPathNameTo(Relative)NtPathName_U(_WithStatus), wrapped
 * in the import tables of every module loaded before the install (kernelbase's and kernel32's
 * file functions, bound to ntdll at load: CreateFileW, CreateDirectoryW, GetFullPathNameW,
 * FindFirstFileExW, GetFileAttributesExW, DeleteFileW, RemoveDirectoryW, MoveFileExW, …;
 * advapi32's GetNamedSecurityInfoW and SetNamedSecurityInfoW) and in ntdll's export table
 * (GetProcAddress and modules loaded later). Calls inside ntdll itself are untouched. Wine's own tools that
 * want a Linux path's DOS name (wine_get_dos_file_name) are unaffected: they do not go through
 * these functions with a '/' path. Programs that mean a Linux path under Wine name it Z:\….
 */
#include <windows.h>
#include <winternl.h>

#include "winecompat.h"

typedef BOOLEAN(NTAPI *dos_to_nt_fn)(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative);
typedef NTSTATUS(NTAPI *dos_to_nt_status_fn)(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative);
typedef ULONG(NTAPI *full_path_fn)(PCWSTR name, ULONG size, PWSTR buffer, PWSTR *file_part);
typedef NTSTATUS(NTAPI *full_path_ex_fn)(PCWSTR name, ULONG size, PWSTR buffer, PWSTR *file_part, void *type);

static dos_to_nt_fn real_dos_to_nt, real_dos_to_relative_nt;
static dos_to_nt_status_fn real_dos_to_nt_status, real_dos_to_relative_nt_status;
static full_path_fn real_full_path;
static full_path_ex_fn real_full_path_ex;

/* A path of this many characters or fewer is rewritten on the stack. */
#define SHORT_PATH 512

/*
 * windows_rooted answers name, or, when name is rooted with a single '/' ("/x", not "//x"),
 * a copy with that '/' turned into '\': in buf when it fits, else in *heap (to be freed).
 */
static PCWSTR windows_rooted(PCWSTR name, WCHAR *buf, WCHAR **heap)
{
	size_t n;
	WCHAR *copy;

	*heap = NULL;
	if (name == NULL || name[0] != L'/' || name[1] == L'/' || name[1] == L'\\')
		return name;
	n = lstrlenW(name) + 1;
	copy = buf;
	if (n > SHORT_PATH) {
		copy = *heap = HeapAlloc(GetProcessHeap(), 0, n * sizeof(WCHAR));
		if (copy == NULL)
			return name;
	}
	CopyMemory(copy, name, n * sizeof(WCHAR));
	copy[0] = L'\\';
	return copy;
}

#define WITH_ROOTED(name, call)                                       \
	do {                                                          \
		WCHAR buf_[SHORT_PATH], *heap_;                       \
		PCWSTR p_ = windows_rooted((name), buf_, &heap_);     \
		ret = call;                                           \
		if (heap_ != NULL)                                    \
			HeapFree(GetProcessHeap(), 0, heap_);         \
	} while (0)

static BOOLEAN NTAPI compat_dos_to_nt(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative)
{
	BOOLEAN ret;

	WITH_ROOTED(dos, real_dos_to_nt(p_, nt, file_part, relative));
	return ret;
}

static BOOLEAN NTAPI compat_dos_to_relative_nt(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative)
{
	BOOLEAN ret;

	WITH_ROOTED(dos, real_dos_to_relative_nt(p_, nt, file_part, relative));
	return ret;
}

static NTSTATUS NTAPI compat_dos_to_nt_status(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative)
{
	NTSTATUS ret;

	WITH_ROOTED(dos, real_dos_to_nt_status(p_, nt, file_part, relative));
	return ret;
}

static NTSTATUS NTAPI compat_dos_to_relative_nt_status(PCWSTR dos, PUNICODE_STRING nt, PWSTR *file_part, void *relative)
{
	NTSTATUS ret;

	WITH_ROOTED(dos, real_dos_to_relative_nt_status(p_, nt, file_part, relative));
	return ret;
}

/* file_part points into buffer, the caller's, so the copy of name does not outlive it. */
static ULONG NTAPI compat_full_path(PCWSTR name, ULONG size, PWSTR buffer, PWSTR *file_part)
{
	ULONG ret;

	WITH_ROOTED(name, real_full_path(p_, size, buffer, file_part));
	return ret;
}

static NTSTATUS NTAPI compat_full_path_ex(PCWSTR name, ULONG size, PWSTR buffer, PWSTR *file_part, void *type)
{
	NTSTATUS ret;

	WITH_ROOTED(name, real_full_path_ex(p_, size, buffer, file_part, type));
	return ret;
}

static const struct {
	const char *name;
	void **real;
	void *wrapper;
} hooks[] = {
    {"RtlDosPathNameToNtPathName_U", (void **)&real_dos_to_nt, (void *)compat_dos_to_nt},
    {"RtlDosPathNameToRelativeNtPathName_U", (void **)&real_dos_to_relative_nt, (void *)compat_dos_to_relative_nt},
    {"RtlDosPathNameToNtPathName_U_WithStatus", (void **)&real_dos_to_nt_status, (void *)compat_dos_to_nt_status},
    {"RtlDosPathNameToRelativeNtPathName_U_WithStatus", (void **)&real_dos_to_relative_nt_status,
     (void *)compat_dos_to_relative_nt_status},
    {"RtlGetFullPathName_U", (void **)&real_full_path, (void *)compat_full_path},
    {"RtlGetFullPathName_UEx", (void **)&real_full_path_ex, (void *)compat_full_path_ex},
};

typedef BOOL(WINAPI *enum_modules_fn)(HANDLE process, HMODULE *modules, DWORD size, DWORD *needed);

/* MAX_MODULES bounds the modules loaded before this DLL's install (a Go program has about a
 * dozen then). */
#define MAX_MODULES 256

BOOL winepath_install(void)
{
	HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
	HMODULE importers[MAX_MODULES];
	enum_modules_fn enum_modules =
		(enum_modules_fn)(void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "K32EnumProcessModules");
	DWORD needed = 0, n;
	size_t i, j;

	if (ntdll == NULL || enum_modules == NULL)
		return FALSE;
	/* Every module loaded so far, whose imports are bound already: kernelbase's and kernel32's
	 * file functions, and advapi32's (GetNamedSecurityInfoW and SetNamedSecurityInfoW, which
	 * kubelet.exe calls on /var/log/pods: advapi32 imports RtlDosPathNameToNtPathName_U from
	 * ntdll, and bcryptprimitives.c loads advapi32 before this install runs). Modules loaded
	 * later bind to ntdll's patched exports. */
	if (!enum_modules(GetCurrentProcess(), importers, sizeof(importers), &needed))
		return FALSE;
	n = needed / sizeof(HMODULE);
	if (n > MAX_MODULES)
		n = MAX_MODULES;
	for (i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		*hooks[i].real = (void *)GetProcAddress(ntdll, hooks[i].name);
		/* An ntdll without the function (an older Wine): nothing calls it. */
		if (*hooks[i].real == NULL)
			continue;
		for (j = 0; j < n; j++)
			if (importers[j] != ntdll)
				winecompat_patch_import((BYTE *)importers[j], "ntdll.dll", hooks[i].name, hooks[i].wrapper);
		if (!winecompat_patch_export((BYTE *)ntdll, hooks[i].name, hooks[i].wrapper))
			return FALSE;
	}
	/* kernelbase's own file functions are the ones that matter. */
	return real_dos_to_nt != NULL && real_full_path != NULL;
}
