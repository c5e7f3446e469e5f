/*
 * hcs.c: the HCS v1 compute-system functions of the stand-in vmcompute.dll (layers.c has the
 * layer functions, hns.c HNSCall): the ones hcsshim's HotAttachEndpoint and HotDetachEndpoint
 * call (hcsshim hnsendpoint.go: OpenContainer, then Modify with a v1 Network request, then
 * Close), which the CNI plugins' default mode (win-bridge without ApiVersion 2) uses.
 *
 * Signatures are hcsshim's (internal/vmcompute/vmcompute.go's //sys lines, the same in v0.13.0,
 * which tools/cni's win-bridge links, and v0.15.0-rc.4):
 *   HcsOpenComputeSystem(id, *system, *result)
 *   HcsCloseComputeSystem(system)
 *   HcsGetComputeSystemProperties(system, query, *properties, *result)
 *   HcsModifyComputeSystem(system, configuration, *result)
 *   HcsRegisterComputeSystemCallback(system, callback, context, *callbackHandle)
 *   HcsUnregisterComputeSystemCallback(callbackHandle)
 * The other v1 functions hcsshim binds (create, start, processes, …) are not exported: hcsshim's
 * bindings find that out at the call (mkwinsyscall's Find) and fail it with
 * ERROR_PROC_NOT_FOUND, and the HotAttach path does not call them.
 *
 * These are synchronous in the v1 API: each returns its HRESULT when the service has answered,
 * with its output (properties) or, on failure, a result document, both in CoTaskMemAlloc'd
 * memory that hcsshim frees with CoTaskMemFree (interop.ConvertAndFreeCoTaskMemString). Only
 * create, start, shutdown, terminate, pause and resume may answer HCS_E_OPERATION_PENDING and
 * complete through a notification (hcsshim's processAsyncHcsResult); none of those is here.
 *
 * One mechanism: vmcompute.dll and computecore.dll are both clients of the same service on
 * Windows, so these functions are a v1 veneer over the stand-in computecore.dll's client
 * (loaded from system32 at the first call): its handles, its one connection to hcsemu, its
 * operations and its notification thread. What the veneer adds is the v1 shape:
 *   - handles of its own (a table, so a stale or foreign handle is E_HANDLE, not a crash);
 *   - any number of callback registrations per handle (HCS_CALLBACK handles), fed from the one
 *     computecore callback the handle gets at the first registration; unregistering waits for
 *     a notification being delivered, as hcsshim relies on ("hcsUnregisterComputeSystemCallback
 *     has its own synchronization"); notifications: SystemExited (0x1, with status
 *     HCS_E_UNEXPECTED_EXIT in the v1 form for an unexpected exit, which hcsshim's waitBackground
 *     tells apart) and ServiceDisconnect (0x01000000 in v1);
 *   - HRESULTs in the form vmcompute.dll returns them: HCS's codes 0x8037_0100 to 0x8037_0110 as
 *     0xC037_01xx (hcsshim internal/hcs/errors.go matches ErrComputeSystemDoesNotExist
 *     0xC037010E, ErrVmcomputeInvalidJSON 0xC037010D, ErrVmcomputeAlreadyStopped 0xC0370110,
 *     ErrVmcomputeUnexpectedExit 0xC0370106 from these functions; its CNI callers tolerate a
 *     missing container only by that code), the others unchanged (hcsshim's
 *     ErrProcessAlreadyStopped is 0x8037011F).
 */
#include <winsock2.h>
#include <windows.h>
#include <objbase.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emu.h"

#define EXPORT __declspec(dllexport)

#define HR_OK ((HRESULT)0)
#define HR_POINTER ((HRESULT)0x80004003L)
#define HR_HANDLE ((HRESULT)0x80070006L)
/* HCS_E_UNEXPECTED_EXIT as vmcompute.dll reports it (hcsshim's ErrVmcomputeUnexpectedExit). */
#define HR_V1_UNEXPECTED_EXIT ((HRESULT)0xC0370106L)

/* computecore.h's types, and the v1 callback (vmcompute's HCS_NOTIFICATION_CALLBACK, as
 * hcsshim's notificationWatcher receives it: type, context, status, data). */
typedef void *HCS_OPERATION;
typedef void *HCS_SYSTEM;
typedef struct {
	DWORD Type;
	PCWSTR EventData;
	HCS_OPERATION Operation;
} HCS_EVENT;
typedef void(CALLBACK *HCS_EVENT_CALLBACK)(const HCS_EVENT *event, void *context);
typedef void(CALLBACK *HCS_OPERATION_COMPLETION)(HCS_OPERATION operation, void *context);
typedef void(CALLBACK *V1_NOTIFICATION_CALLBACK)(DWORD type, void *context, HRESULT status, PCWSTR data);

#define EVENT_SYSTEM_EXITED 0x00000001u      /* HcsEventSystemExited, both APIs */
#define EVENT_SERVICE_DISCONNECT 0x02000000u /* HcsEventServiceDisconnect (computecore) */
#define V1_SERVICE_DISCONNECT 0x01000000u    /* hcsNotificationServiceDisconnect (v1) */

/* ---- the stand-in computecore.dll ---- */

static struct {
	HRESULT(WINAPI *open)(PCWSTR id, DWORD access, HCS_SYSTEM *cs);
	void(WINAPI *close)(HCS_SYSTEM cs);
	HCS_OPERATION(WINAPI *create_op)(void *ctx, HCS_OPERATION_COMPLETION cb);
	void(WINAPI *close_op)(HCS_OPERATION op);
	HRESULT(WINAPI *wait_op)(HCS_OPERATION op, DWORD timeout, PWSTR *result);
	HRESULT(WINAPI *properties)(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR query);
	HRESULT(WINAPI *modify)(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR configuration, HANDLE identity);
	HRESULT(WINAPI *set_callback)(HCS_SYSTEM cs, DWORD options, void *ctx, HCS_EVENT_CALLBACK cb);
} cc;

static INIT_ONCE load_once = INIT_ONCE_STATIC_INIT;
static int loaded;
/* mu guards the tables below and is held while notifications are delivered, so that
 * unregistering waits for a delivery in progress. A critical section: a callback that
 * unregisters on the delivering thread re-enters it. */
static CRITICAL_SECTION mu;

#define LOAD(field, name) (cc.field = (__typeof__(cc.field))(void (*)(void))GetProcAddress(m, name)) != NULL

static BOOL CALLBACK load(PINIT_ONCE once, void *param, void **ctx)
{
	HMODULE m;

	(void)once;
	(void)param;
	(void)ctx;
	InitializeCriticalSection(&mu);
	m = LoadLibraryExW(L"computecore.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
	loaded = m != NULL && LOAD(open, "HcsOpenComputeSystem") && LOAD(close, "HcsCloseComputeSystem") &&
		 LOAD(create_op, "HcsCreateOperation") && LOAD(close_op, "HcsCloseOperation") &&
		 LOAD(wait_op, "HcsWaitForOperationResult") && LOAD(properties, "HcsGetComputeSystemProperties") &&
		 LOAD(modify, "HcsModifyComputeSystem") && LOAD(set_callback, "HcsSetComputeSystemCallback");
	return TRUE;
}

static int setup(void)
{
	InitOnceExecuteOnce(&load_once, load, NULL, NULL);
	return loaded;
}

/* v1_hresult gives an HRESULT the form vmcompute.dll returns it in (see the top). */
static HRESULT v1_hresult(HRESULT hr)
{
	unsigned long u = (unsigned long)hr;

	if (u >= 0x80370100UL && u <= 0x80370110UL)
		u |= 0x40000000UL;
	return (HRESULT)u;
}

/* co_dup copies a LocalAlloc'd document of computecore's into CoTaskMemAlloc'd memory and
 * frees the original; NULL stays NULL. */
static PWSTR co_dup(PWSTR doc)
{
	size_t n;
	PWSTR out;

	if (doc == NULL)
		return NULL;
	n = (wcslen(doc) + 1) * sizeof(WCHAR);
	out = CoTaskMemAlloc(n);
	if (out != NULL)
		memcpy(out, doc, n);
	LocalFree(doc);
	return out;
}

/* ---- handles and registrations (under mu) ---- */

struct v1sys {
	HCS_SYSTEM cs;           /* computecore's handle */
	ULONG_PTR key;           /* computecore's callback context: never reused, never a pointer */
	int watching;            /* computecore's callback is set */
	struct v1sys *next;
};

struct v1cb {
	struct v1sys *sys;
	V1_NOTIFICATION_CALLBACK cb;
	void *ctx;
	struct v1cb *next;
};

static struct v1sys *systems;
static struct v1cb *callbacks;
static ULONG_PTR next_key = 1;

static struct v1sys *find_sys(HCS_SYSTEM h)
{
	struct v1sys *s;

	for (s = systems; s != NULL; s = s->next)
		if ((HCS_SYSTEM)s == h)
			return s;
	return NULL;
}

static int unlink_cb(struct v1cb *c)
{
	struct v1cb **pp;

	for (pp = &callbacks; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return 1;
		}
	return 0;
}

/* exit_status is a v1 SystemExited notification's status: the exit document's Status, or the
 * v1 HCS_E_UNEXPECTED_EXIT when its ExitType says so. */
static HRESULT exit_status(PCWSTR data)
{
	char *s = utf8_of(data), *type = NULL;
	struct jv doc, v;
	HRESULT hr = HR_OK;

	if (s == NULL)
		return HR_OK;
	doc.p = s;
	doc.end = s + strlen(s);
	if (json_find(doc, "Status", &v)) {
		/* An int32 (schema2.SystemExitStatus): a failing HRESULT is written negative. */
		while (v.p < v.end && (*v.p == ' ' || *v.p == '\t' || *v.p == '\n' || *v.p == '\r'))
			v.p++;
		if (v.p < v.end && *v.p == '-') {
			v.p++;
			hr = (HRESULT)(0u - (unsigned long)json_u64(v));
		} else {
			hr = (HRESULT)(unsigned long)json_u64(v);
		}
	}
	if (json_find(doc, "ExitType", &v) && (type = json_string(v)) != NULL && strcmp(type, "UnexpectedExit") == 0)
		hr = HR_V1_UNEXPECTED_EXIT;
	free(type);
	free(s);
	return v1_hresult(hr);
}

/* notify runs on computecore's notification thread: it hands the event to every v1
 * registration of the handle whose key it carries (none after the handle was closed). */
static void CALLBACK notify(const HCS_EVENT *ev, void *context)
{
	ULONG_PTR key = (ULONG_PTR)context;
	struct v1cb *c, *list;
	size_t n, i;
	DWORD type;
	HRESULT status = HR_OK;

	switch (ev->Type) {
	case EVENT_SYSTEM_EXITED:
		type = EVENT_SYSTEM_EXITED;
		status = exit_status(ev->EventData);
		break;
	case EVENT_SERVICE_DISCONNECT:
		type = V1_SERVICE_DISCONNECT;
		break;
	default:
		return; /* the emulator sends a system nothing else */
	}
	EnterCriticalSection(&mu);
	/* The registrations are copied first: a callback may unregister (itself or another) on
	 * this thread, which re-enters mu and changes the list. */
	for (n = 0, c = callbacks; c != NULL; c = c->next)
		n += c->sys->key == key;
	list = n > 0 ? calloc(n, sizeof(*list)) : NULL;
	for (i = 0, c = callbacks; list != NULL && c != NULL; c = c->next)
		if (c->sys->key == key)
			list[i++] = *c;
	for (i = 0; list != NULL && i < n; i++)
		list[i].cb(type, list[i].ctx, status, ev->EventData);
	LeaveCriticalSection(&mu);
	free(list);
}

/* ---- the functions ---- */

EXPORT HRESULT WINAPI HcsOpenComputeSystem(PCWSTR id, HCS_SYSTEM *system, PWSTR *result)
{
	struct v1sys *s;
	HRESULT hr;

	if (result != NULL)
		*result = NULL;
	if (id == NULL || system == NULL)
		return HR_POINTER;
	*system = NULL;
	if (!setup())
		return EMU_HR_SERVICE_NOT_AVAILABLE;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return EMU_HR_OUTOFMEMORY;
	hr = cc.open(id, GENERIC_ALL, &s->cs);
	if (FAILED(hr)) {
		free(s);
		return v1_hresult(hr);
	}
	EnterCriticalSection(&mu);
	s->key = next_key++;
	s->next = systems;
	systems = s;
	LeaveCriticalSection(&mu);
	*system = s;
	return HR_OK;
}

EXPORT HRESULT WINAPI HcsCloseComputeSystem(HCS_SYSTEM system)
{
	struct v1sys *s, **pp;
	struct v1cb **cp;

	if (!setup())
		return EMU_HR_SERVICE_NOT_AVAILABLE;
	EnterCriticalSection(&mu);
	s = find_sys(system);
	if (s == NULL) {
		LeaveCriticalSection(&mu);
		return HR_HANDLE;
	}
	for (pp = &systems; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	/* Registrations left on the handle go with it: no notification reaches them any more. */
	for (cp = &callbacks; *cp != NULL;) {
		if ((*cp)->sys == s) {
			struct v1cb *c = *cp;

			*cp = c->next;
			free(c);
		} else {
			cp = &(*cp)->next;
		}
	}
	LeaveCriticalSection(&mu);
	/* Synchronous, as computecore's: the daemon has dropped the handle when this returns. */
	cc.close(s->cs);
	free(s);
	return HR_OK;
}

/* system_call runs one operation-based computecore call on a v1 handle and waits for it:
 * on success *out (if not NULL) gets the output document, on failure *result the error
 * document, both CoTaskMemAlloc'd. */
static HRESULT system_call(HCS_SYSTEM system, PCWSTR doc, int modify, PWSTR *out, PWSTR *result)
{
	struct v1sys *s;
	HCS_SYSTEM cs;
	HCS_OPERATION op;
	PWSTR answer = NULL;
	HRESULT hr;

	if (out != NULL)
		*out = NULL;
	if (result != NULL)
		*result = NULL;
	if (!setup())
		return EMU_HR_SERVICE_NOT_AVAILABLE;
	EnterCriticalSection(&mu);
	s = find_sys(system);
	cs = s != NULL ? s->cs : NULL;
	LeaveCriticalSection(&mu);
	if (cs == NULL)
		return HR_HANDLE;
	op = cc.create_op(NULL, NULL);
	if (op == NULL)
		return EMU_HR_OUTOFMEMORY;
	hr = modify ? cc.modify(cs, op, doc, NULL) : cc.properties(cs, op, doc);
	/* The stand-in's operations end when the daemon answers or its connection goes. */
	if (SUCCEEDED(hr))
		hr = cc.wait_op(op, INFINITE, &answer);
	cc.close_op(op);
	if (SUCCEEDED(hr)) {
		if (out != NULL)
			*out = co_dup(answer);
		else
			LocalFree(answer);
	} else if (result != NULL) {
		*result = co_dup(answer);
	} else {
		LocalFree(answer);
	}
	return v1_hresult(hr);
}

EXPORT HRESULT WINAPI HcsGetComputeSystemProperties(HCS_SYSTEM system, PCWSTR query, PWSTR *properties, PWSTR *result)
{
	if (properties == NULL)
		return HR_POINTER;
	return system_call(system, query, 0, properties, result);
}

EXPORT HRESULT WINAPI HcsModifyComputeSystem(HCS_SYSTEM system, PCWSTR configuration, PWSTR *result)
{
	if (configuration == NULL) {
		if (result != NULL)
			*result = NULL;
		return HR_POINTER;
	}
	return system_call(system, configuration, 1, NULL, result);
}

EXPORT HRESULT WINAPI HcsRegisterComputeSystemCallback(HCS_SYSTEM system, V1_NOTIFICATION_CALLBACK callback, void *context,
						       void **callback_handle)
{
	struct v1sys *s;
	struct v1cb *c;
	HCS_SYSTEM cs = NULL;
	ULONG_PTR key = 0;
	HRESULT hr = HR_OK;

	if (callback_handle == NULL || callback == NULL)
		return HR_POINTER;
	*callback_handle = NULL;
	if (!setup())
		return EMU_HR_SERVICE_NOT_AVAILABLE;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return EMU_HR_OUTOFMEMORY;
	EnterCriticalSection(&mu);
	s = find_sys(system);
	if (s == NULL) {
		LeaveCriticalSection(&mu);
		free(c);
		return HR_HANDLE;
	}
	c->sys = s;
	c->cb = callback;
	c->ctx = context;
	c->next = callbacks;
	callbacks = c;
	if (!s->watching) {
		s->watching = 1;
		cs = s->cs;
		key = s->key;
	}
	LeaveCriticalSection(&mu);
	/* The first registration sets computecore's callback, which delivers an exit that came
	 * before it, so a system that exited before anyone listened still reports it. Later
	 * registrations on the same handle get what happens after them. */
	if (cs != NULL)
		hr = cc.set_callback(cs, 0, (void *)key, notify);
	if (FAILED(hr)) {
		EnterCriticalSection(&mu);
		unlink_cb(c);
		if ((s = find_sys(system)) != NULL)
			s->watching = 0;
		LeaveCriticalSection(&mu);
		free(c);
		return v1_hresult(hr);
	}
	*callback_handle = c;
	return HR_OK;
}

EXPORT HRESULT WINAPI HcsUnregisterComputeSystemCallback(void *callback_handle)
{
	int found;

	if (!setup())
		return EMU_HR_SERVICE_NOT_AVAILABLE;
	/* Taking mu waits for a notification being delivered to finish. */
	EnterCriticalSection(&mu);
	found = unlink_cb(callback_handle);
	LeaveCriticalSection(&mu);
	if (!found)
		return HR_HANDLE;
	free(callback_handle);
	return HR_OK;
}
