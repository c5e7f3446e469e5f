/*
 * winecompat.c: Wine 8 compatibility for Go programs, loaded with the ProcessPrng stand-in
 * (bcryptprimitives.c) because that DLL is the one every Go >= 1.22 Windows program loads,
 * first thing, before any user code runs. Nothing here is used on Windows: the DLL exists only
 * in the private Wine prefix (hack/wine/setup.sh).
 *
 * FileDispositionInformationEx. Go >= 1.25 deletes files (os.Remove inside os.RemoveAll, so
 * also testing.T.TempDir's cleanup) with NtSetInformationFile(FileDispositionInformationEx =
 * 64, POSIX semantics) and falls back to the classic FileDispositionInformation when the call
 * returns STATUS_INVALID_INFO_CLASS, STATUS_INVALID_PARAMETER or STATUS_NOT_SUPPORTED
 * (internal/syscall/windows.Deleteat). Wine 8 does not know class 64 and answers
 * STATUS_NOT_IMPLEMENTED (Win32 ERROR_INVALID_FUNCTION, "Invalid function"), which Go does
 * not treat as "unsupported", so every RemoveAll of a non-empty folder fails under Wine 8.
 *
 * The fix: Go finds NtSetInformationFile with GetProcAddress, which reads ntdll's export
 * table. At load time this DLL points that export at a wrapper that calls the real function
 * and turns STATUS_NOT_IMPLEMENTED for class 64 into STATUS_INVALID_INFO_CLASS, the status a
 * Windows older than 1607 gives, so Go takes its own fallback. Calls that ntdll's importers
 * (kernel32, kernelbase) bound at load time are untouched. A Wine that implements class 64
 * never returns STATUS_NOT_IMPLEMENTED for it, so the wrapper then changes nothing.
 *
 * hcsshim's safefile.RemoveRelative (the tombstones of a layer import) sets the same class with
 * only FILE_DISPOSITION_DELETE and has no fallback. Windows documents that flag alone as the
 * classic delete-on-close (FILE_DISPOSITION_INFORMATION_EX, ntddk.h: "FILE_DISPOSITION_DELETE:
 * ... the file is deleted when the last handle is closed", the behaviour of
 * FileDispositionInformation with DeleteFile TRUE), and FILE_DISPOSITION_DO_NOT_DELETE (0) as
 * DeleteFile FALSE; so those two values are carried out with FileDispositionInformation, and
 * every other combination (POSIX semantics, ignore read-only: Go's) still gets
 * STATUS_INVALID_INFO_CLASS.
 *
 * An export table holds 32-bit offsets from the module's base, so the wrapper is reached
 * through a small jump stub allocated within 4 GiB above ntdll.
 *
 * BackupRead and BackupWrite, which Wine 8 does not implement, are filled in the same way, in
 * kernel32's export table (winebackup.c), NtCreateNamedPipeFile, whose instances without
 * read or write access Wine 8 leaves listening, in ntdll's (winepipe.c), CreateProcessW,
 * which fails now and then when Wine cannot start the new process, in kernel32's (winespawn.c),
 * CreateSymbolicLinkW, a stub in Wine 8 that makes nothing, in kernel32's (winesymlink.c), and
 * AF_UNIX sockets, which Wine 8 lacks, in ws2_32's and mswsock's (winesock.c). Rooted paths
 * that begin with '/', which Wine 8 resolves on the Linux machine instead of the current drive,
 * are fixed in ntdll's path conversions as kernelbase's and kernel32's import tables bind them
 * (winepath.c).
 */
#include <windows.h>
#include <winternl.h>

#include "winecompat.h"

#define FILE_DISPOSITION_INFORMATION_EX_CLASS 64
#define STATUS_NOT_IMPLEMENTED_ ((NTSTATUS)0xC0000002L)
#define STATUS_INVALID_INFO_CLASS_ ((NTSTATUS)0xC0000003L)
#define STATUS_DIRECTORY_NOT_EMPTY_ ((NTSTATUS)0xC0000101L)
#define FILE_DISPOSITION_INFORMATION_CLASS 13
#define FILE_DISPOSITION_DELETE_ 0x1

typedef NTSTATUS(NTAPI *set_information_file_fn)(HANDLE file, PIO_STATUS_BLOCK io, PVOID info,
						 ULONG length, ULONG info_class);

static set_information_file_fn real_set_information_file;

static NTSTATUS NTAPI compat_set_information_file(HANDLE file, PIO_STATUS_BLOCK io, PVOID info,
						   ULONG length, ULONG info_class)
{
	NTSTATUS status;

	/* A handle on a symbolic link itself: delete the link, not its target (winesymlink.c). */
	if ((info_class == FILE_DISPOSITION_INFORMATION_CLASS && info != NULL && length >= sizeof(BOOLEAN) &&
	     winesymlink_dispose(file, *(BOOLEAN *)info != 0, &status)) ||
	    (info_class == FILE_DISPOSITION_INFORMATION_EX_CLASS && info != NULL && length >= sizeof(ULONG) &&
	     winesymlink_dispose(file, (*(ULONG *)info & FILE_DISPOSITION_DELETE_) != 0, &status))) {
		if (io != NULL) {
			io->Status = status;
			io->Information = 0;
		}
		return status;
	}
	status = real_set_information_file(file, io, info, length, info_class);
	if (status == STATUS_DIRECTORY_NOT_EMPTY_ && winesymlink_clear_dangling(file))
		status = real_set_information_file(file, io, info, length, info_class);
	if (status == STATUS_NOT_IMPLEMENTED_ && info_class == FILE_DISPOSITION_INFORMATION_EX_CLASS && info != NULL &&
	    length >= sizeof(ULONG) && (*(ULONG *)info & ~(ULONG)FILE_DISPOSITION_DELETE_) == 0) {
		/* FILE_DISPOSITION_INFORMATION: one BOOLEAN, DeleteFile. */
		BOOLEAN del = (*(ULONG *)info & FILE_DISPOSITION_DELETE_) != 0;

		return real_set_information_file(file, io, &del, sizeof(del), FILE_DISPOSITION_INFORMATION_CLASS);
	}

	if (status == STATUS_NOT_IMPLEMENTED_ && info_class == FILE_DISPOSITION_INFORMATION_EX_CLASS)
		return STATUS_INVALID_INFO_CLASS_;
	return status;
}

/* export_slot returns the export table entry (an RVA) of the named function, or NULL. */
static DWORD *export_slot(BYTE *base, const char *name)
{
	IMAGE_DOS_HEADER *dos = (IMAGE_DOS_HEADER *)base;
	IMAGE_NT_HEADERS64 *nt;
	IMAGE_DATA_DIRECTORY dir;
	IMAGE_EXPORT_DIRECTORY *exports;
	DWORD *names, *functions;
	WORD *ordinals;
	DWORD i;

	if (dos->e_magic != IMAGE_DOS_SIGNATURE)
		return NULL;
	nt = (IMAGE_NT_HEADERS64 *)(base + dos->e_lfanew);
	if (nt->Signature != IMAGE_NT_SIGNATURE)
		return NULL;
	dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
	if (dir.VirtualAddress == 0)
		return NULL;
	exports = (IMAGE_EXPORT_DIRECTORY *)(base + dir.VirtualAddress);
	names = (DWORD *)(base + exports->AddressOfNames);
	ordinals = (WORD *)(base + exports->AddressOfNameOrdinals);
	functions = (DWORD *)(base + exports->AddressOfFunctions);
	for (i = 0; i < exports->NumberOfNames; i++) {
		if (lstrcmpA((const char *)(base + names[i]), name) == 0)
			return &functions[ordinals[i]];
	}
	return NULL;
}

/* stub_near allocates, within 4 GiB above base, an executable "jmp [rip+0]; .quad target". */
static BYTE *stub_near(BYTE *base, SIZE_T image_size, void *target)
{
	static const BYTE jmp[6] = {0xFF, 0x25, 0x00, 0x00, 0x00, 0x00};
	ULONG_PTR start = ((ULONG_PTR)base + image_size + 0xFFFF) & ~(ULONG_PTR)0xFFFF;
	ULONG_PTR limit = (ULONG_PTR)base + 0xFFFF0000UL;
	ULONG_PTR at;
	DWORD old;

	for (at = start; at < limit; at += 0x10000) {
		BYTE *stub = VirtualAlloc((void *)at, 4096, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);

		if (stub == NULL)
			continue;
		if ((ULONG_PTR)stub < (ULONG_PTR)base || (ULONG_PTR)stub >= limit) {
			VirtualFree(stub, 0, MEM_RELEASE);
			continue;
		}
		CopyMemory(stub, jmp, sizeof(jmp));
		CopyMemory(stub + sizeof(jmp), &target, sizeof(target));
		if (!VirtualProtect(stub, 4096, PAGE_EXECUTE_READ, &old)) {
			VirtualFree(stub, 0, MEM_RELEASE);
			return NULL;
		}
		FlushInstructionCache(GetCurrentProcess(), stub, 16);
		return stub;
	}
	return NULL;
}

BOOL winecompat_patch_export(BYTE *module, const char *name, void *wrapper)
{
	IMAGE_NT_HEADERS64 *nt = (IMAGE_NT_HEADERS64 *)(module + ((IMAGE_DOS_HEADER *)module)->e_lfanew);
	DWORD *slot = export_slot(module, name), old;
	BYTE *stub;

	if (slot == NULL)
		return FALSE;
	stub = stub_near(module, nt->OptionalHeader.SizeOfImage, wrapper);
	if (stub == NULL)
		return FALSE;
	if (!VirtualProtect(slot, sizeof(*slot), PAGE_READWRITE, &old))
		return FALSE;
	*slot = (DWORD)(stub - module);
	VirtualProtect(slot, sizeof(*slot), old, &old);
	return TRUE;
}

BOOL winecompat_patch_import(BYTE *module, const char *dll, const char *name, void *wrapper)
{
	IMAGE_DOS_HEADER *dos = (IMAGE_DOS_HEADER *)module;
	IMAGE_NT_HEADERS64 *nt;
	IMAGE_DATA_DIRECTORY dir;
	IMAGE_IMPORT_DESCRIPTOR *imp;
	BOOL patched = FALSE;

	if (dos->e_magic != IMAGE_DOS_SIGNATURE)
		return FALSE;
	nt = (IMAGE_NT_HEADERS64 *)(module + dos->e_lfanew);
	if (nt->Signature != IMAGE_NT_SIGNATURE)
		return FALSE;
	dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_IMPORT];
	if (dir.VirtualAddress == 0)
		return FALSE;
	for (imp = (IMAGE_IMPORT_DESCRIPTOR *)(module + dir.VirtualAddress); imp->Name != 0; imp++) {
		IMAGE_THUNK_DATA64 *names, *slots;

		if (lstrcmpiA((const char *)(module + imp->Name), dll) != 0 || imp->OriginalFirstThunk == 0)
			continue;
		names = (IMAGE_THUNK_DATA64 *)(module + imp->OriginalFirstThunk);
		slots = (IMAGE_THUNK_DATA64 *)(module + imp->FirstThunk);
		for (; names->u1.AddressOfData != 0; names++, slots++) {
			IMAGE_IMPORT_BY_NAME *by_name;
			DWORD old;

			if (IMAGE_SNAP_BY_ORDINAL64(names->u1.Ordinal))
				continue;
			by_name = (IMAGE_IMPORT_BY_NAME *)(module + names->u1.AddressOfData);
			if (lstrcmpA((const char *)by_name->Name, name) != 0)
				continue;
			if (!VirtualProtect(&slots->u1.Function, sizeof(slots->u1.Function), PAGE_READWRITE, &old))
				return FALSE;
			slots->u1.Function = (ULONGLONG)(ULONG_PTR)wrapper;
			VirtualProtect(&slots->u1.Function, sizeof(slots->u1.Function), old, &old);
			patched = TRUE;
		}
	}
	return patched;
}

LONG_PTR winecompat_linux_syscall4(LONG_PTR nr, LONG_PTR a, LONG_PTR b, LONG_PTR c, LONG_PTR d)
{
	LONG_PTR ret;
	register LONG_PTR r10 __asm__("r10") = d;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return ret;
}

/* append_uint writes v in decimal at line + *i. */
static void append_uint(char *line, int *i, unsigned long v)
{
	char digits[12];
	int d = 0;

	do {
		digits[d++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	while (d > 0)
		line[(*i)++] = digits[--d];
}

void winecompat_log(const char *text)
{
	WCHAR path[MAX_PATH];
	char line[512];
	DWORD n;
	int i = 4, k;
	HANDLE f;

	/* "pid N: <text>\r\n", formatted by hand: this DLL links kernel32 alone. */
	lstrcpyA(line, "pid ");
	append_uint(line, &i, GetCurrentProcessId());
	line[i++] = ':';
	line[i++] = ' ';
	for (k = 0; text[k] != 0 && i < (int)sizeof(line) - 3; k++)
		line[i++] = text[k];
	line[i++] = '\r';
	line[i++] = '\n';
	line[i] = 0;
	n = GetEnvironmentVariableW(L"RUNHCS_WINECOMPAT_LOG", path, MAX_PATH);
	if (n == 0 || n >= MAX_PATH) {
		OutputDebugStringA(line);
		return;
	}
	/* FILE_APPEND_DATA alone: each write goes to the end, so the lines of processes that
	 * write at once do not overwrite each other. */
	f = CreateFileW(path, FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
			OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
	if (f == INVALID_HANDLE_VALUE) {
		OutputDebugStringA(line);
		return;
	}
	WriteFile(f, line, (DWORD)i, &n, NULL);
	CloseHandle(f);
}

void winecompat_log_error(const char *what, unsigned long id, unsigned long err)
{
	char line[256];
	int i = 0, k;

	for (k = 0; what[k] != 0 && i < 200; k++)
		line[i++] = what[k];
	append_uint(line, &i, id);
	lstrcpyA(line + i, ": error ");
	i += 8;
	append_uint(line, &i, err);
	line[i] = 0;
	winecompat_log(line);
}

BOOL winecompat_install(void)
{
	BYTE *ntdll = (BYTE *)GetModuleHandleW(L"ntdll.dll");
	DWORD *slot;

	/* Only under Wine: Windows has all of it and must not be patched. */
	if (ntdll == NULL || GetProcAddress((HMODULE)ntdll, "wine_get_version") == NULL)
		return TRUE;
	slot = export_slot(ntdll, "NtSetInformationFile");
	if (slot == NULL)
		return FALSE;
	real_set_information_file = (set_information_file_fn)(void *)(ntdll + *slot);
	return winecompat_patch_export(ntdll, "NtSetInformationFile", (void *)compat_set_information_file) &&
	       winebackup_install() && winepipe_install() && winespawn_install() && winesymlink_install() &&
	       winesock_install() && winepath_install() && winejob_install() && wineaccount_install() &&
	       winectrl_install() && winemem_install();
}
