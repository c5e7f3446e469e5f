/*
 * bindfltapi.c: the stand-in bindfltapi.dll (Windows' bind filter, which maps a folder onto
 * another folder or a volume), holding the three functions go-winio's pkg/bindfilter binds
 * (BfSetupFilter, BfRemoveMapping, BfGetMappings), with its signatures. Wine 8 has no
 * bindfltapi.dll, so every caller failed with "Module not found": containerd (2.x and 1.7,
 * core/mount/mount_windows.go Unmount) calls BfRemoveMapping on a task's rootfs folder when it
 * deletes the task's bundle, and could not delete it.
 *
 * What it does: no bind mapping is emulated. BfSetupFilter refuses with E_NOTIMPL, so no
 * mapping ever exists, and BfRemoveMapping answers what the bind filter answers for a folder
 * that has no mapping: HRESULT_FROM_WIN32(ERROR_NOT_FOUND). Assumption: containerd, written
 * against the real filter, takes ERROR_NOT_FOUND or ERROR_INVALID_PARAMETER from
 * BfRemoveMapping as "not a mount point" (mount_windows.go); which of the two the filter gives
 * for an unmapped folder is not documented, and either reaches the same path in containerd.
 * BfGetMappings refuses with E_NOTIMPL (its answer's layout is not documented either).
 * Making the mappings for real (a bind mount of hcsemu's volume or folder onto the folder) is
 * not done: docs/status.md, "Windows layers".
 */
#include <windows.h>

#define HRESULT_NOT_FOUND ((HRESULT)0x80070490L) /* HRESULT_FROM_WIN32(ERROR_NOT_FOUND) */

__declspec(dllexport) HRESULT WINAPI BfSetupFilter(HANDLE job, ULONG flags, LPCWSTR virt_root, LPCWSTR virt_target,
						   LPCWSTR *exceptions, ULONG exception_count)
{
	(void)job;
	(void)flags;
	(void)virt_root;
	(void)virt_target;
	(void)exceptions;
	(void)exception_count;
	return E_NOTIMPL;
}

__declspec(dllexport) HRESULT WINAPI BfRemoveMapping(HANDLE job, LPCWSTR virt_root)
{
	(void)job;
	if (virt_root == NULL || virt_root[0] == 0)
		return E_INVALIDARG;
	return HRESULT_NOT_FOUND;
}

__declspec(dllexport) HRESULT WINAPI BfGetMappings(ULONG flags, HANDLE job, LPCWSTR virt_root, PSID sid,
						   PULONG buffer_size, PVOID out_buffer)
{
	(void)flags;
	(void)job;
	(void)virt_root;
	(void)sid;
	(void)buffer_size;
	(void)out_buffer;
	return E_NOTIMPL;
}
