/*
 * computenetwork.c: a stand-in for Windows' computenetwork.dll (the Host Compute Network API)
 * that forwards every call to hcsemu's HNS over loopback TCP (hack/wine/common/emu.c), so that
 * the Windows build's HCN bindings (internal/computenetwork/zsyscall_windows.go) and hcsshim's
 * hcn package run under Wine against the emulator. Only for tests: installed in the private
 * Wine prefix by hack/wine/setup.sh and nowhere else.
 *
 * The API is computenetwork.h's (https://learn.microsoft.com/windows-server/networking/technologies/hcn/hcn-top):
 * every function hcsshim's hcn package binds (hcn/zsyscall_windows.go) is exported with the
 * same name and arguments. Kept from HCN:
 *   - the calls are synchronous; output documents (properties, enumerations) and error records
 *     are allocated with CoTaskMemAlloc, which the caller frees with CoTaskMemFree (hcsshim:
 *     interop.ConvertAndFreeCoTaskMemString); a success has no error record, since hcsshim's
 *     checkForErrors takes any record for a failure;
 *   - the daemon's HRESULTs are passed through unchanged (wire methods and arguments:
 *     internal/hcsemu/wire/hns.go); hcsemu unreachable or gone is
 *     HRESULT_FROM_WIN32(ERROR_SERVICE_NOT_ACTIVE), as in the Linux client;
 *   - handles are opaque: this DLL keeps a table from handle to the object's GUID, and the wire
 *     names objects by GUID (lower case). A handle that is not open, or of another kind, is
 *     E_HANDLE, as in the Linux client.
 * Load balancers (kube-proxy's Services, through hnslib's hcn) are forwarded like the other
 * objects. SDN routes, which hcsshim's hcn also binds, are not emulated: their functions answer
 * E_NOTIMPL (hcsshim's hcn.IsNotImplemented) with a record that says so. A NULL pointer where computenetwork.h takes a REFGUID or an out-parameter is
 * E_POINTER (an assumption: the documentation does not say).
 */
#include <winsock2.h>
#include <windows.h>
#include <objbase.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emu.h"
#include "../common/hcn.h"

#define EXPORT __declspec(dllexport)

typedef void *HCN_NETWORK;
typedef void *HCN_ENDPOINT;
typedef void *HCN_NAMESPACE;
typedef void *HCN_LOADBALANCER;
typedef void *HCN_ROUTE;

#define HR_OK ((HRESULT)0)
#define HR_POINTER ((HRESULT)0x80004003L)
#define HR_NOTIMPL ((HRESULT)0x80004001L)
#define HR_HANDLE ((HRESULT)0x80070006L)

/* ---- handles ---- */

enum kind { KIND_NETWORK = 1, KIND_ENDPOINT, KIND_NAMESPACE, KIND_LOADBALANCER };

struct handle {
	uintptr_t value;
	enum kind kind;
	char id[40];
	struct handle *next;
};

static SRWLOCK handles_mu = SRWLOCK_INIT;
static struct handle *handles;
static uintptr_t handles_next;

/* handle_new records an open handle on the object id; NULL when out of memory. */
static void *handle_new(enum kind kind, const char *id)
{
	struct handle *h;
	uintptr_t v;

	if (strlen(id) >= sizeof(h->id))
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->kind = kind;
	strcpy(h->id, id);
	AcquireSRWLockExclusive(&handles_mu);
	/* Never 0 (no handle) and never a pointer this process could mistake for one. */
	v = h->value = 0x48430000u + ++handles_next;
	h->next = handles;
	handles = h;
	ReleaseSRWLockExclusive(&handles_mu);
	return (void *)v;
}

/* handle_id copies the GUID of an open handle of that kind into id; 0 if there is none. */
static int handle_id(void *value, enum kind kind, char id[40])
{
	struct handle *h;
	int ok = 0;

	AcquireSRWLockShared(&handles_mu);
	for (h = handles; h != NULL; h = h->next) {
		if (h->value == (uintptr_t)value && h->kind == kind) {
			strcpy(id, h->id);
			ok = 1;
			break;
		}
	}
	ReleaseSRWLockShared(&handles_mu);
	return ok;
}

/* handle_close forgets an open handle of that kind; E_HANDLE if there is none. The service
 * keeps nothing per handle, so closing is local. */
static HRESULT handle_close(void *value, enum kind kind)
{
	struct handle **p, *h = NULL;

	AcquireSRWLockExclusive(&handles_mu);
	for (p = &handles; *p != NULL; p = &(*p)->next) {
		if ((*p)->value == (uintptr_t)value && (*p)->kind == kind) {
			h = *p;
			*p = h->next;
			break;
		}
	}
	ReleaseSRWLockExclusive(&handles_mu);
	free(h);
	return h != NULL ? HR_OK : HR_HANDLE;
}

/* ---- arguments ---- */

/* guid_text writes a GUID in the canonical lower-case form the wire uses. */
static void guid_text(const GUID *g, char out[40])
{
	snprintf(out, 40, "%08lx-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", (unsigned long)g->Data1, g->Data2,
		 g->Data3, g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6],
		 g->Data4[7]);
}

static int guid_zero(const GUID *g)
{
	static const GUID zero;

	return memcmp(g, &zero, sizeof(zero)) == 0;
}

/* add_member appends ,"key":"utf8 of w" (or "key":… when first); w NULL is the empty string. */
static int add_member(struct buf *b, const char *key, PCWSTR w)
{
	char *s = w != NULL ? utf8_of(w) : dup_str("");
	int ok = s != NULL && buf_adds(b, b->len > 1 ? ",\"" : "\"") && buf_adds(b, key) && buf_adds(b, "\":") &&
		 buf_add_string(b, s);

	free(s);
	return ok;
}

static int add_member8(struct buf *b, const char *key, const char *s)
{
	return buf_adds(b, b->len > 1 ? ",\"" : "\"") && buf_adds(b, key) && buf_adds(b, "\":") && buf_add_string(b, s);
}

/* reply_id takes the "id" of a wire.HcnObjectReply into id; 0 if missing or too long. */
static int reply_id(const char *reply, char id[40])
{
	struct jv r, v;
	char *s;
	int ok = 0;

	if (reply == NULL)
		return 0;
	r.p = reply;
	r.end = reply + strlen(reply);
	if (!json_find(r, "id", &v))
		return 0;
	s = json_string(v);
	if (s != NULL && strlen(s) < 40) {
		strcpy(id, s);
		ok = 1;
	}
	free(s);
	return ok;
}

static void clear(PWSTR *p)
{
	if (p != NULL)
		*p = NULL;
}

/* ---- the shapes of the HCN functions ---- */

/* create: Hcn<Kind>Create(id, settings, &handle, &record); network is the endpoint's network
 * handle (NULL for the others). */
static HRESULT create(const char *method, enum kind kind, void *network, const GUID *id, PCWSTR settings,
		      void **handle, PWSTR *record)
{
	struct buf b = {0};
	char gid[40], netid[40], *reply = NULL;
	HRESULT hr;

	clear(record);
	if (handle != NULL)
		*handle = NULL;
	if (id == NULL || handle == NULL || settings == NULL)
		return HR_POINTER;
	if (kind == KIND_ENDPOINT && !handle_id(network, KIND_NETWORK, netid))
		return HR_HANDLE;
	guid_text(id, gid);
	if (!buf_adds(&b, "{") || (!guid_zero(id) && !add_member8(&b, "id", gid)) ||
	    (kind == KIND_ENDPOINT && !add_member8(&b, "network", netid)) || !add_member(&b, "settings", settings) ||
	    !buf_adds(&b, "}")) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = hcn_call(method, b.data, &reply, NULL, record);
	buf_free(&b);
	if (SUCCEEDED(hr)) {
		hr = reply_id(reply, gid) ? HR_OK : EMU_HR_PROTOCOL_ERROR;
		if (SUCCEEDED(hr) && (*handle = handle_new(kind, gid)) == NULL)
			hr = EMU_HR_OUTOFMEMORY;
	}
	free(reply);
	return hr;
}

/* by_id: Open and Delete, which name the object by its GUID. */
static HRESULT by_id(const char *method, enum kind kind, const GUID *id, void **handle, PWSTR *record)
{
	struct buf b = {0};
	char gid[40], *reply = NULL;
	HRESULT hr;

	clear(record);
	if (handle != NULL)
		*handle = NULL;
	if (id == NULL)
		return HR_POINTER;
	guid_text(id, gid);
	if (!buf_adds(&b, "{") || !add_member8(&b, "id", gid) || !buf_adds(&b, "}")) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = hcn_call(method, b.data, handle != NULL ? &reply : NULL, NULL, record);
	buf_free(&b);
	if (SUCCEEDED(hr) && handle != NULL) {
		hr = reply_id(reply, gid) ? HR_OK : EMU_HR_PROTOCOL_ERROR;
		if (SUCCEEDED(hr) && (*handle = handle_new(kind, gid)) == NULL)
			hr = EMU_HR_OUTOFMEMORY;
	}
	free(reply);
	return hr;
}

/* on_handle: Modify (doc = settings, out NULL) and Query (doc = query, out = properties). */
static HRESULT on_handle(const char *method, enum kind kind, void *handle, PCWSTR doc, PWSTR *out, PWSTR *record)
{
	struct buf b = {0};
	char gid[40];
	HRESULT hr;

	clear(out);
	clear(record);
	if (!handle_id(handle, kind, gid))
		return HR_HANDLE;
	if (doc == NULL || (out == NULL && strstr(method, "Query") != NULL))
		return HR_POINTER;
	if (!buf_adds(&b, "{") || !add_member8(&b, "id", gid) || !add_member(&b, "document", doc) ||
	    !buf_adds(&b, "}")) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = hcn_call(method, b.data, NULL, out, record);
	buf_free(&b);
	return hr;
}

static HRESULT enumerate(const char *method, PCWSTR query, PWSTR *out, PWSTR *record)
{
	struct buf b = {0};
	HRESULT hr;

	clear(out);
	clear(record);
	if (out == NULL)
		return HR_POINTER;
	if (!buf_adds(&b, "{") || !add_member(&b, "query", query) || !buf_adds(&b, "}")) {
		buf_free(&b);
		return EMU_HR_OUTOFMEMORY;
	}
	hr = hcn_call(method, b.data, NULL, out, record);
	buf_free(&b);
	return hr;
}

/* ---- networks, endpoints, namespaces ---- */

EXPORT HRESULT WINAPI HcnEnumerateNetworks(PCWSTR query, PWSTR *networks, PWSTR *record)
{
	return enumerate("HcnEnumerateNetworks", query, networks, record);
}

EXPORT HRESULT WINAPI HcnCreateNetwork(const GUID *id, PCWSTR settings, HCN_NETWORK *network, PWSTR *record)
{
	return create("HcnCreateNetwork", KIND_NETWORK, NULL, id, settings, network, record);
}

EXPORT HRESULT WINAPI HcnOpenNetwork(const GUID *id, HCN_NETWORK *network, PWSTR *record)
{
	if (network == NULL)
		return HR_POINTER;
	return by_id("HcnOpenNetwork", KIND_NETWORK, id, network, record);
}

EXPORT HRESULT WINAPI HcnModifyNetwork(HCN_NETWORK network, PCWSTR settings, PWSTR *record)
{
	return on_handle("HcnModifyNetwork", KIND_NETWORK, network, settings, NULL, record);
}

EXPORT HRESULT WINAPI HcnQueryNetworkProperties(HCN_NETWORK network, PCWSTR query, PWSTR *properties, PWSTR *record)
{
	return on_handle("HcnQueryNetworkProperties", KIND_NETWORK, network, query, properties, record);
}

EXPORT HRESULT WINAPI HcnDeleteNetwork(const GUID *id, PWSTR *record)
{
	return by_id("HcnDeleteNetwork", KIND_NETWORK, id, NULL, record);
}

EXPORT HRESULT WINAPI HcnCloseNetwork(HCN_NETWORK network)
{
	return handle_close(network, KIND_NETWORK);
}

EXPORT HRESULT WINAPI HcnEnumerateEndpoints(PCWSTR query, PWSTR *endpoints, PWSTR *record)
{
	return enumerate("HcnEnumerateEndpoints", query, endpoints, record);
}

EXPORT HRESULT WINAPI HcnCreateEndpoint(HCN_NETWORK network, const GUID *id, PCWSTR settings, HCN_ENDPOINT *endpoint,
					PWSTR *record)
{
	return create("HcnCreateEndpoint", KIND_ENDPOINT, network, id, settings, endpoint, record);
}

EXPORT HRESULT WINAPI HcnOpenEndpoint(const GUID *id, HCN_ENDPOINT *endpoint, PWSTR *record)
{
	if (endpoint == NULL)
		return HR_POINTER;
	return by_id("HcnOpenEndpoint", KIND_ENDPOINT, id, endpoint, record);
}

EXPORT HRESULT WINAPI HcnModifyEndpoint(HCN_ENDPOINT endpoint, PCWSTR settings, PWSTR *record)
{
	return on_handle("HcnModifyEndpoint", KIND_ENDPOINT, endpoint, settings, NULL, record);
}

EXPORT HRESULT WINAPI HcnQueryEndpointProperties(HCN_ENDPOINT endpoint, PCWSTR query, PWSTR *properties,
						 PWSTR *record)
{
	return on_handle("HcnQueryEndpointProperties", KIND_ENDPOINT, endpoint, query, properties, record);
}

EXPORT HRESULT WINAPI HcnDeleteEndpoint(const GUID *id, PWSTR *record)
{
	return by_id("HcnDeleteEndpoint", KIND_ENDPOINT, id, NULL, record);
}

EXPORT HRESULT WINAPI HcnCloseEndpoint(HCN_ENDPOINT endpoint)
{
	return handle_close(endpoint, KIND_ENDPOINT);
}

EXPORT HRESULT WINAPI HcnEnumerateNamespaces(PCWSTR query, PWSTR *namespaces, PWSTR *record)
{
	return enumerate("HcnEnumerateNamespaces", query, namespaces, record);
}

EXPORT HRESULT WINAPI HcnCreateNamespace(const GUID *id, PCWSTR settings, HCN_NAMESPACE *ns, PWSTR *record)
{
	return create("HcnCreateNamespace", KIND_NAMESPACE, NULL, id, settings, ns, record);
}

EXPORT HRESULT WINAPI HcnOpenNamespace(const GUID *id, HCN_NAMESPACE *ns, PWSTR *record)
{
	if (ns == NULL)
		return HR_POINTER;
	return by_id("HcnOpenNamespace", KIND_NAMESPACE, id, ns, record);
}

EXPORT HRESULT WINAPI HcnModifyNamespace(HCN_NAMESPACE ns, PCWSTR settings, PWSTR *record)
{
	return on_handle("HcnModifyNamespace", KIND_NAMESPACE, ns, settings, NULL, record);
}

EXPORT HRESULT WINAPI HcnQueryNamespaceProperties(HCN_NAMESPACE ns, PCWSTR query, PWSTR *properties, PWSTR *record)
{
	return on_handle("HcnQueryNamespaceProperties", KIND_NAMESPACE, ns, query, properties, record);
}

EXPORT HRESULT WINAPI HcnDeleteNamespace(const GUID *id, PWSTR *record)
{
	return by_id("HcnDeleteNamespace", KIND_NAMESPACE, id, NULL, record);
}

EXPORT HRESULT WINAPI HcnCloseNamespace(HCN_NAMESPACE ns)
{
	return handle_close(ns, KIND_NAMESPACE);
}

/* ---- load balancers ---- */

EXPORT HRESULT WINAPI HcnEnumerateLoadBalancers(PCWSTR query, PWSTR *lbs, PWSTR *record)
{
	return enumerate("HcnEnumerateLoadBalancers", query, lbs, record);
}

EXPORT HRESULT WINAPI HcnCreateLoadBalancer(const GUID *id, PCWSTR settings, HCN_LOADBALANCER *lb, PWSTR *record)
{
	return create("HcnCreateLoadBalancer", KIND_LOADBALANCER, NULL, id, settings, lb, record);
}

EXPORT HRESULT WINAPI HcnOpenLoadBalancer(const GUID *id, HCN_LOADBALANCER *lb, PWSTR *record)
{
	if (lb == NULL)
		return HR_POINTER;
	return by_id("HcnOpenLoadBalancer", KIND_LOADBALANCER, id, lb, record);
}

EXPORT HRESULT WINAPI HcnModifyLoadBalancer(HCN_LOADBALANCER lb, PCWSTR settings, PWSTR *record)
{
	return on_handle("HcnModifyLoadBalancer", KIND_LOADBALANCER, lb, settings, NULL, record);
}

EXPORT HRESULT WINAPI HcnQueryLoadBalancerProperties(HCN_LOADBALANCER lb, PCWSTR query, PWSTR *properties,
						     PWSTR *record)
{
	return on_handle("HcnQueryLoadBalancerProperties", KIND_LOADBALANCER, lb, query, properties, record);
}

EXPORT HRESULT WINAPI HcnDeleteLoadBalancer(const GUID *id, PWSTR *record)
{
	return by_id("HcnDeleteLoadBalancer", KIND_LOADBALANCER, id, NULL, record);
}

EXPORT HRESULT WINAPI HcnCloseLoadBalancer(HCN_LOADBALANCER lb)
{
	return handle_close(lb, KIND_LOADBALANCER);
}

/* ---- SDN routes: not emulated ---- */

/* not_emulated answers E_NOTIMPL with an error record in HCS's ResultError shape, the one
 * hcsemu's records have. */
static HRESULT not_emulated(const char *fn, PWSTR *out, PWSTR *record)
{
	char doc[256];

	clear(out);
	clear(record);
	snprintf(doc, sizeof(doc), "{\"Error\":%ld,\"ErrorMessage\":\"%s: SDN routes are not emulated by hcsemu\"}",
		 (long)HR_NOTIMPL, fn);
	if (record != NULL)
		*record = co_wide_of(doc);
	return HR_NOTIMPL;
}

EXPORT HRESULT WINAPI HcnEnumerateSdnRoutes(PCWSTR query, PWSTR *routes, PWSTR *record)
{
	(void)query;
	return not_emulated("HcnEnumerateSdnRoutes", routes, record);
}

EXPORT HRESULT WINAPI HcnCreateSdnRoute(const GUID *id, PCWSTR settings, HCN_ROUTE *route, PWSTR *record)
{
	(void)id;
	(void)settings;
	if (route != NULL)
		*route = NULL;
	return not_emulated("HcnCreateSdnRoute", NULL, record);
}

EXPORT HRESULT WINAPI HcnOpenSdnRoute(const GUID *id, HCN_ROUTE *route, PWSTR *record)
{
	(void)id;
	if (route != NULL)
		*route = NULL;
	return not_emulated("HcnOpenSdnRoute", NULL, record);
}

EXPORT HRESULT WINAPI HcnDeleteSdnRoute(const GUID *id, PWSTR *record)
{
	(void)id;
	return not_emulated("HcnDeleteSdnRoute", NULL, record);
}

/* No route handle can be open, so every call on one is E_HANDLE. */
EXPORT HRESULT WINAPI HcnModifySdnRoute(HCN_ROUTE route, PCWSTR settings, PWSTR *record)
{
	(void)route;
	(void)settings;
	clear(record);
	return HR_HANDLE;
}

EXPORT HRESULT WINAPI HcnQuerySdnRouteProperties(HCN_ROUTE route, PCWSTR query, PWSTR *properties, PWSTR *record)
{
	(void)route;
	(void)query;
	clear(properties);
	clear(record);
	return HR_HANDLE;
}

EXPORT HRESULT WINAPI HcnCloseSdnRoute(HCN_ROUTE route)
{
	(void)route;
	return HR_HANDLE;
}
