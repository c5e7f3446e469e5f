/*
 * bindfltapi.c: the stand-in bindfltapi.dll (Windows' bind filter, which maps a folder or a
 * volume onto a folder, the virtualization root), holding the three functions go-winio's
 * pkg/bindfilter binds (BfSetupFilter, BfRemoveMapping, BfGetMappings), with its signatures.
 * Wine 8 has no bindfltapi.dll: containerd (2.x and 1.7, core/mount/mount_windows.go Unmount)
 * calls BfRemoveMapping on a task's rootfs folder when it deletes the task's bundle, and the
 * shim's HostProcess containers (internal/hostprocess) bind their image's files and mounts with
 * BfSetupFilter.
 *
 * What it does: a host-wide mapping (no job, as go-winio's ApplyFileBinding makes them) is a
 * bind mount, made by hcsemu's storage filter in the emulated host's mount namespace
 * (wire.MethodBindSetup / MethodBindRemove, over the connection every stand-in uses,
 * common/emu.c): the root and a folder target are sent as the Linux paths Wine maps them to; a
 * volume target (\\?\Volume{GUID}\) as it is, which the storage filter resolves to the
 * volume's mount. BINDFLT_FLAG_READ_ONLY_MAPPING makes it read-only. Like Windows' filter, the
 * mapping belongs to the host, not to the process that made it: it outlives it, and any process
 * may remove it; hcsemu removes what is left when it stops (a reboot does on Windows).
 *
 * Not emulated (E_NOTIMPL): a mapping in a job's silo (job handle, or
 * BINDFLT_FLAG_USE_CURRENT_SILO_MAPPING), merged mappings, exception paths, and BfGetMappings
 * (its answer's layout is not documented).
 *
 * BfRemoveMapping of a root without a mapping answers HRESULT_FROM_WIN32(ERROR_NOT_FOUND), also
 * when hcsemu is not reachable (no mapping can exist then). Assumption: containerd, written
 * against the real filter, takes ERROR_NOT_FOUND or ERROR_INVALID_PARAMETER from
 * BfRemoveMapping as "not a mount point" (mount_windows.go); which of the two the filter gives
 * for an unmapped folder is not documented, and either reaches the same path in containerd.
 * Tested in internal/wintest, TestBindFilterUnmappedFolder and TestBindFilterMapping.
 */
#include <winsock2.h>
#include <windows.h>
#include <stdlib.h>
#include <wchar.h>

#include "../common/emu.h"
#include "../common/json.h"

#define HRESULT_NOT_FOUND ((HRESULT)0x80070490L) /* HRESULT_FROM_WIN32(ERROR_NOT_FOUND) */

#define BINDFLT_FLAG_READ_ONLY_MAPPING 0x1
#define BINDFLT_FLAG_MERGED_BIND_MAPPING 0x2
#define BINDFLT_FLAG_USE_CURRENT_SILO_MAPPING 0x4
#define BINDFLT_FLAG_NO_MULTIPLE_TARGETS 0x40

/* add_path appends a path as wire.BindArgs takes it: a volume path as is, any other as the
 * Linux path Wine maps it to; 0 if it cannot be mapped (or out of memory). */
static int add_path(struct buf *b, PCWSTR p)
{
	char *s;
	int ok;

	if (wcsncmp(p, L"\\\\?\\Volume{", 11) == 0)
		s = utf8_of(p);
	else
		s = emu_unix_path(p);
	ok = s != NULL && buf_add_string(b, s);
	free(s);
	return ok;
}

__declspec(dllexport) HRESULT WINAPI BfSetupFilter(HANDLE job, ULONG flags, LPCWSTR virt_root, LPCWSTR virt_target,
						   LPCWSTR *exceptions, ULONG exception_count)
{
	struct buf b = {0};
	HRESULT hr;
	int ok;

	(void)exceptions;
	if (virt_root == NULL || virt_root[0] == 0 || virt_target == NULL || virt_target[0] == 0)
		return E_INVALIDARG;
	if (job != NULL || exception_count != 0 ||
	    (flags & ~(BINDFLT_FLAG_READ_ONLY_MAPPING | BINDFLT_FLAG_NO_MULTIPLE_TARGETS)) != 0)
		return E_NOTIMPL; /* silos, merged mappings and exceptions are not emulated */
	ok = buf_adds(&b, "{\"root\":") && add_path(&b, virt_root) && buf_adds(&b, ",\"target\":") &&
	     add_path(&b, virt_target) &&
	     buf_adds(&b, (flags & BINDFLT_FLAG_READ_ONLY_MAPPING) ? ",\"readOnly\":true}" : "}");
	hr = ok ? emu_call("BindSetup", b.data, NULL) : E_INVALIDARG;
	buf_free(&b);
	return hr;
}

__declspec(dllexport) HRESULT WINAPI BfRemoveMapping(HANDLE job, LPCWSTR virt_root)
{
	struct buf b = {0};
	HRESULT hr;

	if (virt_root == NULL || virt_root[0] == 0)
		return E_INVALIDARG;
	if (job != NULL)
		return E_NOTIMPL;
	if (!buf_adds(&b, "{\"root\":") || !add_path(&b, virt_root) || !buf_adds(&b, "}")) {
		buf_free(&b);
		return HRESULT_NOT_FOUND; /* a path Wine cannot map has no mapping */
	}
	hr = emu_call("BindRemove", b.data, NULL);
	buf_free(&b);
	if (hr == EMU_HR_SERVICE_NOT_AVAILABLE || hr == EMU_HR_SERVICE_DISCONNECT)
		return HRESULT_NOT_FOUND;
	return hr;
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
