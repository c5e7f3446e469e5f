/*
 * hcn.c: see hcn.h.
 */
#include <winsock2.h>
#include <windows.h>
#include <objbase.h>
#include <stdlib.h>

#include "emu.h"
#include "hcn.h"

WCHAR *co_wide_of(const char *s)
{
	int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
	WCHAR *w;

	if (n <= 0)
		n = 1;
	w = CoTaskMemAlloc((SIZE_T)n * sizeof(WCHAR));
	if (w == NULL)
		return NULL;
	if (MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n) <= 0)
		w[0] = 0;
	return w;
}

HRESULT hcn_call(const char *method, const char *args, char **reply, PWSTR *out, PWSTR *record)
{
	char *doc = NULL, *rep = NULL;
	HRESULT hr = emu_call_doc(method, args, &rep, &doc);

	if (hr == EMU_HR_SERVICE_NOT_AVAILABLE || hr == EMU_HR_SERVICE_DISCONNECT)
		hr = HCN_HR_SERVICE_NOT_ACTIVE;
	if (FAILED(hr)) {
		if (record != NULL && doc != NULL && doc[0] != 0)
			*record = co_wide_of(doc);
		free(rep);
		rep = NULL;
	} else if (out != NULL) {
		*out = co_wide_of(doc != NULL ? doc : "");
		if (*out == NULL)
			hr = EMU_HR_OUTOFMEMORY;
	}
	if (reply != NULL)
		*reply = rep;
	else
		free(rep);
	free(doc);
	return hr;
}
