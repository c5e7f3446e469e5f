/*
 * layers.c: the layer functions of a stand-in vmcompute.dll, forwarded to hcsemu's storage filter
 * over loopback TCP (hack/wine/common/emu.c), so that hcsshim's internal/wclayer (and the
 * project's internal/wclayer and containerd's windows snapshotter over it) run under Wine
 * against the emulator. Only for tests: installed in the private Wine prefix by
 * hack/wine/setup.sh and nowhere else.
 *
 * Every function hcsshim binds from vmcompute.dll for layers is exported with hcsshim's
 * signature (internal/wclayer/wclayer.go's //sys lines and zsyscall_windows.go: a slice is a
 * pointer and a uintptr count, a string a NUL-terminated UTF-16 pointer); the result is the
 * HRESULT hcsemu answers, passed through unchanged. The daemon's methods and arguments are
 * internal/hcsemu/wire/storage.go's. Layer folders travel as the Linux paths Wine maps them to
 * (wine_get_unix_file_name), so the daemon never sees a drive letter. A volume the filter
 * mounts is named \\?\Volume{GUID}\, and the daemon links it into this prefix's dosdevices
 * folder so that Wine resolves that name (see wire.LayerArgs.DosDevices).
 *
 * HNSCall, the HNS entry point hcsshim also binds from vmcompute.dll, is in hns.c beside this
 * one.
 */
#include <winsock2.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emu.h"
#include "../common/hcn.h"

#define EXPORT __declspec(dllexport)

/* hcsshim's driverInfo (internal/wclayer/layerutils.go): a flavour and a home folder. When the
 * home folder is not empty a layer id is a folder name under it (the root package's DriverInfo
 * form); hcsshim's own calls pass an empty one and the whole path as the id. */
struct driver_info {
	int flavour;
	PCWSTR home_dir;
};

/* WC_LAYER_DESCRIPTOR (layerutils.go): a parent layer. */
struct layer_descriptor {
	GUID layer_id;
	DWORD flags;
	PCWSTR path;
};

#define HR_OK ((HRESULT)0)
#define HR_INVALIDARG ((HRESULT)0x80070057L)
#define HR_POINTER ((HRESULT)0x80004003L)
#define HR_NOTIMPL ((HRESULT)0x80004001L)
/* HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER). */
#define HR_INSUFFICIENT_BUFFER ((HRESULT)0x8007007AL)

/* layer_path joins a driver info's home folder and an id into a layer's Windows path
 * (malloc'd), as hcsshim's root package does before it calls internal/wclayer. */
static WCHAR *layer_path(const struct driver_info *info, PCWSTR id)
{
	size_t nh, ni;
	WCHAR *w;

	if (id == NULL)
		return NULL;
	nh = (info != NULL && info->home_dir != NULL) ? wcslen(info->home_dir) : 0;
	ni = wcslen(id);
	w = malloc((nh + 1 + ni + 1) * sizeof(WCHAR));
	if (w == NULL)
		return NULL;
	if (nh == 0) {
		memcpy(w, id, (ni + 1) * sizeof(WCHAR));
		return w;
	}
	memcpy(w, info->home_dir, nh * sizeof(WCHAR));
	w[nh] = L'\\';
	memcpy(w + nh + 1, id, (ni + 1) * sizeof(WCHAR));
	return w;
}

/* ---- arguments ---- */

/* add_unix appends the Linux path of a Windows path as a JSON string; 0 when it cannot be
 * mapped (or out of memory). */
static int add_unix(struct buf *b, PCWSTR dos)
{
	char *u = emu_unix_path(dos);
	int ok = u != NULL && buf_add_string(b, u);

	free(u);
	return ok;
}

/*
 * layer_args builds wire.LayerArgs for the layer (info, id), its parents (descriptors, nearest
 * first) and, with link, this prefix's dosdevices folder; extra (NULL, or a JSON fragment
 * starting with a comma) adds the other members. A path Wine cannot map is E_INVALIDARG.
 */
static HRESULT layer_args(struct buf *b, const struct driver_info *info, PCWSTR id,
			  const struct layer_descriptor *descs, size_t n, int link, const char *extra)
{
	WCHAR *path = layer_path(info, id);
	size_t i;
	int ok;

	if (path == NULL)
		return id == NULL ? HR_POINTER : EMU_HR_OUTOFMEMORY;
	if (n > 0 && descs == NULL) {
		free(path);
		return HR_POINTER;
	}
	ok = buf_adds(b, "{\"path\":") && add_unix(b, path);
	free(path);
	if (ok && n > 0) {
		ok = buf_adds(b, ",\"parents\":[");
		for (i = 0; ok && i < n; i++)
			ok = descs[i].path != NULL && (i == 0 || buf_adds(b, ",")) && add_unix(b, descs[i].path);
		ok = ok && buf_adds(b, "]");
	}
	if (ok && link) {
		char *dd = emu_dos_devices();

		/* Without it the volume still exists; only Wine cannot resolve its name. */
		if (dd != NULL)
			ok = buf_adds(b, ",\"dosDevices\":") && buf_add_string(b, dd);
		free(dd);
	}
	if (ok && extra != NULL)
		ok = buf_adds(b, extra);
	ok = ok && buf_adds(b, "}");
	return ok ? HR_OK : HR_INVALIDARG;
}

/* layer_call sends method with wire.LayerArgs and returns its HRESULT (and reply). */
static HRESULT layer_call(const char *method, const struct driver_info *info, PCWSTR id,
			  const struct layer_descriptor *descs, size_t n, int link, const char *extra, char **reply)
{
	struct buf b = {0};
	HRESULT hr = layer_args(&b, info, id, descs, n, link, extra);

	if (hr == HR_OK)
		hr = emu_call(method, b.data, reply);
	buf_free(&b);
	return hr;
}

/* path_call sends method with wire.LayerArgs naming one folder (ProcessBaseImage and the like,
 * which take a path, not a driver info and id). */
static HRESULT path_call(const char *method, PCWSTR path)
{
	return layer_call(method, NULL, path, NULL, 0, 0, NULL, NULL);
}

/* ---- the exports ---- */

EXPORT HRESULT WINAPI ActivateLayer(const struct driver_info *info, PCWSTR id)
{
	return layer_call("ActivateLayer", info, id, NULL, 0, 0, NULL, NULL);
}

EXPORT HRESULT WINAPI DeactivateLayer(const struct driver_info *info, PCWSTR id)
{
	return layer_call("DeactivateLayer", info, id, NULL, 0, 0, NULL, NULL);
}

EXPORT HRESULT WINAPI PrepareLayer(const struct driver_info *info, PCWSTR id, const struct layer_descriptor *descs,
				   size_t n)
{
	return layer_call("PrepareLayer", info, id, descs, n, 1, NULL, NULL);
}

EXPORT HRESULT WINAPI UnprepareLayer(const struct driver_info *info, PCWSTR id)
{
	return layer_call("UnprepareLayer", info, id, NULL, 0, 0, NULL, NULL);
}

/*
 * GetLayerMountPath answers as hcsshim calls it (getlayermountpath.go): with a NULL buffer it
 * sets *length to the path's length in UTF-16 units, terminator included; then it copies the
 * path into a buffer of that length. The path is the volume's \\?\Volume{GUID}\ or, for a
 * folder layer, the layer's path as the caller spelled it. Assumption: a buffer shorter than
 * the path fails with ERROR_INSUFFICIENT_BUFFER (undocumented).
 */
EXPORT HRESULT WINAPI GetLayerMountPath(const struct driver_info *info, PCWSTR id, UINT_PTR *length, WCHAR *buffer)
{
	char *reply = NULL;
	WCHAR *path = NULL;
	size_t need;
	HRESULT hr;
	struct jv r, v;

	if (length == NULL)
		return HR_POINTER;
	hr = layer_call("GetLayerMountPath", info, id, NULL, 0, 1, NULL, &reply);
	if (hr != HR_OK) {
		free(reply);
		return hr;
	}
	if (reply == NULL)
		return EMU_HR_PROTOCOL_ERROR;
	r.p = reply;
	r.end = reply + strlen(reply);
	if (json_find(r, "volume", &v) && json_bool(v)) {
		char *s = json_find(r, "path", &v) ? json_string(v) : NULL;

		path = wide_of(s, 0);
		free(s);
	} else {
		path = layer_path(info, id);
	}
	free(reply);
	if (path == NULL)
		return EMU_HR_OUTOFMEMORY;
	need = wcslen(path) + 1;
	if (buffer == NULL) {
		*length = need;
	} else if (*length < need) {
		hr = HR_INSUFFICIENT_BUFFER;
	} else {
		memcpy(buffer, path, need * sizeof(WCHAR));
		*length = need;
	}
	free(path);
	return hr;
}

/* CreateSandboxLayer: parent is unused (hcsshim passes 0). */
EXPORT HRESULT WINAPI CreateSandboxLayer(const struct driver_info *info, PCWSTR id, UINT_PTR parent,
					 const struct layer_descriptor *descs, size_t n)
{
	(void)parent;
	return layer_call("CreateSandboxLayer", info, id, descs, n, 0, NULL, NULL);
}

EXPORT HRESULT WINAPI ExpandSandboxSize(const struct driver_info *info, PCWSTR id, ULONGLONG size)
{
	char extra[48];

	snprintf(extra, sizeof(extra), ",\"size\":%llu", (unsigned long long)size);
	return layer_call("ExpandSandboxSize", info, id, NULL, 0, 0, extra, NULL);
}

EXPORT HRESULT WINAPI DestroyLayer(const struct driver_info *info, PCWSTR id)
{
	return layer_call("DestroyLayer", info, id, NULL, 0, 0, NULL, NULL);
}

EXPORT HRESULT WINAPI LayerExists(const struct driver_info *info, PCWSTR id, DWORD *exists)
{
	char *reply = NULL;
	HRESULT hr;
	struct jv r, v;

	if (exists == NULL)
		return HR_POINTER;
	hr = layer_call("LayerExists", info, id, NULL, 0, 0, NULL, &reply);
	if (hr == HR_OK) {
		if (reply == NULL) {
			hr = EMU_HR_PROTOCOL_ERROR;
		} else {
			r.p = reply;
			r.end = reply + strlen(reply);
			*exists = json_find(r, "exists", &v) && json_bool(v);
		}
	}
	free(reply);
	return hr;
}

/* hex_value parses n hex digits; -1 if one is not. */
static long long hex_value(const char *s, int n)
{
	long long v = 0;
	int i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

EXPORT HRESULT WINAPI NameToGuid(PCWSTR name, GUID *guid)
{
	struct buf b = {0};
	char *u = utf8_of(name), *reply = NULL, *g = NULL;
	HRESULT hr = HR_OK;
	struct jv r, v;
	int i, ok;

	if (name == NULL || guid == NULL) {
		free(u);
		return HR_POINTER;
	}
	ok = u != NULL && buf_adds(&b, "{\"name\":") && buf_add_string(&b, u) && buf_adds(&b, "}");
	free(u);
	if (!ok) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = emu_call("NameToGuid", b.data, &reply);
	buf_free(&b);
	if (hr == HR_OK) {
		r.p = reply;
		r.end = reply != NULL ? reply + strlen(reply) : NULL;
		g = (reply != NULL && json_find(r, "guid", &v)) ? json_string(v) : NULL;
		/* 8-4-4-4-12 hex digits: Data1, Data2, Data3, then Data4's eight bytes. */
		if (g == NULL || strlen(g) != 36 || hex_value(g, 8) < 0 || hex_value(g + 9, 4) < 0 ||
		    hex_value(g + 14, 4) < 0) {
			hr = EMU_HR_PROTOCOL_ERROR;
		} else {
			guid->Data1 = (unsigned long)hex_value(g, 8);
			guid->Data2 = (unsigned short)hex_value(g + 9, 4);
			guid->Data3 = (unsigned short)hex_value(g + 14, 4);
			for (i = 0; i < 8; i++) {
				long long x = hex_value(g + (i < 2 ? 19 + 2 * i : 24 + 2 * (i - 2)), 2);

				if (x < 0)
					hr = EMU_HR_PROTOCOL_ERROR;
				guid->Data4[i] = (unsigned char)x;
			}
		}
	}
	free(g);
	free(reply);
	return hr;
}

EXPORT HRESULT WINAPI ProcessBaseImage(PCWSTR path)
{
	return path_call("ProcessBaseImage", path);
}

EXPORT HRESULT WINAPI ProcessUtilityImage(PCWSTR path)
{
	return path_call("ProcessUtilityImage", path);
}

EXPORT HRESULT WINAPI GrantVmAccess(PCWSTR vmid, PCWSTR path)
{
	struct buf b = {0};
	char *id = utf8_of(vmid);
	HRESULT hr;
	int ok;

	if (vmid == NULL || path == NULL) {
		free(id);
		return HR_POINTER;
	}
	ok = id != NULL && buf_adds(&b, "{\"vmId\":") && buf_add_string(&b, id) && buf_adds(&b, ",\"path\":") &&
	     add_unix(&b, path) && buf_adds(&b, "}");
	free(id);
	hr = ok ? emu_call("GrantVmAccess", b.data, NULL) : HR_INVALIDARG;
	buf_free(&b);
	return hr;
}

/*
 * GetBaseImages hands back the daemon's document (wire.BaseImagesReply) in CoTaskMemAlloc'd
 * memory, which hcsshim frees with CoTaskMemFree (getsharedbaseimages.go:
 * interop.ConvertAndFreeCoTaskMemString).
 */
EXPORT HRESULT WINAPI GetBaseImages(PWSTR *buffer)
{
	char *reply = NULL, *doc = NULL;
	HRESULT hr;
	struct jv r, v;

	if (buffer == NULL)
		return HR_POINTER;
	*buffer = NULL;
	hr = emu_call("GetBaseImages", "{}", &reply);
	if (hr == HR_OK) {
		r.p = reply;
		r.end = reply != NULL ? reply + strlen(reply) : NULL;
		doc = (reply != NULL && json_find(r, "document", &v)) ? json_string(v) : NULL;
		if (doc == NULL)
			hr = EMU_HR_PROTOCOL_ERROR;
		else if ((*buffer = co_wide_of(doc)) == NULL)
			hr = EMU_HR_OUTOFMEMORY;
	}
	free(doc);
	free(reply);
	return hr;
}

/* The functions below are forwarded too; hcsemu answers E_NOTIMPL naming each one it does not
 * emulate: the caller gets the daemon's HRESULT, not one made up here. */

EXPORT HRESULT WINAPI CreateLayer(const struct driver_info *info, PCWSTR id, PCWSTR parent)
{
	(void)parent;
	return layer_call("CreateLayer", info, id, NULL, 0, 0, NULL, NULL);
}

EXPORT HRESULT WINAPI CopyLayer(const struct driver_info *info, PCWSTR src, PCWSTR dst,
				const struct layer_descriptor *descs, size_t n)
{
	(void)dst;
	return layer_call("CopyLayer", info, src, descs, n, 0, NULL, NULL);
}

/*
 * folder_call sends ImportLayer or ExportLayer: the layer, its parents and, as wire.LayerArgs'
 * Source, the Linux path of the folder the call reads (ImportLayer: the import folder hcsshim's
 * legacy layer writer filled) or fills (ExportLayer: the folder hcsshim's legacy layer reader
 * walks). hcsemu reads and writes that folder in hcsshim's legacy layout itself
 * (internal/hcsemu/layerimport_linux.go).
 */
static HRESULT folder_call(const char *method, const struct driver_info *info, PCWSTR id, PCWSTR path,
			   const struct layer_descriptor *descs, size_t n)
{
	struct buf extra = {0};
	HRESULT hr;
	int ok;

	if (path == NULL)
		return HR_POINTER;
	ok = buf_adds(&extra, ",\"source\":") && add_unix(&extra, path);
	hr = ok ? layer_call(method, info, id, descs, n, 0, extra.data, NULL) : HR_INVALIDARG;
	buf_free(&extra);
	return hr;
}

EXPORT HRESULT WINAPI ImportLayer(const struct driver_info *info, PCWSTR id, PCWSTR path,
				  const struct layer_descriptor *descs, size_t n)
{
	return folder_call("ImportLayer", info, id, path, descs, n);
}

EXPORT HRESULT WINAPI ExportLayer(const struct driver_info *info, PCWSTR id, PCWSTR path,
				  const struct layer_descriptor *descs, size_t n)
{
	return folder_call("ExportLayer", info, id, path, descs, n);
}
