/*
 * bcryptprimitives.c: a stand-in for Windows' bcryptprimitives.dll that exports only ProcessPrng,
 * for running Go Windows binaries under Wine 8 (Debian 12), whose Wine lacks it.
 *
 * Why: since Go 1.22 the Windows runtime fills its random state with ProcessPrng, which it
 * loads from bcryptprimitives.dll (runtime/os_windows.go) and throws if it cannot find it. It
 * loads it with LOAD_LIBRARY_SEARCH_SYSTEM32, so this DLL must sit in the prefix's
 * drive_c/windows/system32, not next to the .exe (hack/wine/setup.sh puts it there).
 *
 * ProcessPrng is documented as BOOL ProcessPrng(PBYTE pbData, SIZE_T cbData) and always
 * returns TRUE (https://learn.microsoft.com/windows/win32/seccng/processprng). Wine has
 * RtlGenRandom (exported by advapi32 as SystemFunction036), which takes a ULONG length, so a
 * large request is filled in pieces.
 *
 * The same DLL carries the Wine 8 compatibility fixes Go programs need (winecompat.c), since
 * it is loaded into every Go program first.
 *
 * Built by hack/wine/setup.sh with x86_64-w64-mingw32-gcc (Debian gcc-mingw-w64-x86-64).
 */
#include <windows.h>

#include "winecompat.h"

typedef BOOLEAN(WINAPI *rtl_gen_random_fn)(PVOID buffer, ULONG length);

static rtl_gen_random_fn rtl_gen_random;

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
	if (reason == DLL_PROCESS_DETACH && reserved != NULL)
		winemem_detach(); /* the process exits (not FreeLibrary): its commits go with it */
	if (reason == DLL_PROCESS_ATTACH) {
		HMODULE advapi;

		DisableThreadLibraryCalls(instance);
		advapi = LoadLibraryW(L"advapi32.dll");
		if (advapi == NULL)
			return FALSE;
		rtl_gen_random = (rtl_gen_random_fn)(void *)GetProcAddress(advapi, "SystemFunction036");
		if (rtl_gen_random == NULL)
			return FALSE;
		if (!winecompat_install()) {
			/* Not fatal: the program runs, but RemoveAll of a non-empty folder fails. */
			static const char msg[] = "bcryptprimitives (runhcs hack/wine): could not patch "
						  "NtSetInformationFile; os.RemoveAll will fail under Wine\r\n";
			DWORD n;

			WriteFile(GetStdHandle(STD_ERROR_HANDLE), msg, sizeof(msg) - 1, &n, NULL);
		}
	}
	return TRUE;
}

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
	while (size > 0) {
		ULONG chunk = size > 0x40000000 ? 0x40000000 : (ULONG)size;

		if (!rtl_gen_random(data, chunk)) {
			/* ProcessPrng never fails on Windows; a caller cannot handle failure, and the Go
			 * runtime throws on FALSE, which is the loudest way to report it here. */
			return FALSE;
		}
		data += chunk;
		size -= chunk;
	}
	return TRUE;
}
