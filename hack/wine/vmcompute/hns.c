/*
 * hns.c: HNSCall, the HNS v1 entry point of the stand-in vmcompute.dll (layers.c has the rest),
 * forwarded to hcsemu's HNS (wire.MethodHNSCall) over the DLL's blocking connection.
 *
 * The signature is hcsshim's (internal/hns and hcn zsyscall_windows.go:
 * HNSCall(method, path, object *uint16, response **uint16) HRESULT). The response is HNS's
 * {"Success":…,"Error":…,"Output":…} document in CoTaskMemAlloc'd memory, which hcsshim frees
 * with CoTaskMemFree; HNS reports a refused request in that document with Success false and a
 * successful HRESULT, so a failing HRESULT is the transport's (hcsemu unreachable or gone:
 * HRESULT_FROM_WIN32(ERROR_SERVICE_NOT_ACTIVE)) or the daemon's, passed through, and then there
 * is no response.
 */
#include <winsock2.h>
#include <windows.h>
#include <stdlib.h>

#include "../common/emu.h"
#include "../common/hcn.h"

#define EXPORT __declspec(dllexport)

#define HR_POINTER ((HRESULT)0x80004003L)

/* add_member appends "key":"utf8 of w" (w NULL: the empty string), with a comma unless first. */
static int add_member(struct buf *b, const char *key, PCWSTR w)
{
	char *s = w != NULL ? utf8_of(w) : dup_str("");
	int ok = s != NULL && buf_adds(b, b->len > 1 ? ",\"" : "\"") && buf_adds(b, key) && buf_adds(b, "\":") &&
		 buf_add_string(b, s);

	free(s);
	return ok;
}

EXPORT HRESULT WINAPI HNSCall(PCWSTR method, PCWSTR path, PCWSTR object, PWSTR *response)
{
	struct buf b = {0};
	HRESULT hr;

	if (response == NULL || method == NULL || path == NULL)
		return HR_POINTER;
	*response = NULL;
	if (!buf_adds(&b, "{") || !add_member(&b, "method", method) || !add_member(&b, "path", path) ||
	    !add_member(&b, "request", object) || !buf_adds(&b, "}")) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = hcn_call("HNSCall", b.data, NULL, response, NULL);
	buf_free(&b);
	return hr;
}
