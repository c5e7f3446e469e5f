/*
 * pdh.c: the stand-in pdh.dll (Windows' Performance Data Helper), holding the functions the
 * Windows kubelet's counters use (k8s.io/kubernetes v1.37.2 pkg/kubelet/winstats, through
 * github.com/JeffAshton/win_pdh, which binds PdhAddCounterW, PdhAddEnglishCounterW,
 * PdhCloseQuery, PdhCollectQueryData, PdhGetFormattedCounterValue, PdhGetFormattedCounterArrayW,
 * PdhOpenQuery and PdhValidatePathW at start, all of them or none), with pdh.h's signatures.
 *
 * Why: Wine 8's pdh.dll has no \Process(_Total)\Working Set - Private (kubelet.exe stopped at
 * start with "unable to add process counter: ... Error code is c0000bb9") and answers the
 * counters it has from the Linux machine, not from the emulated Windows host. This one answers
 * every counter from hcsemu (wire.MethodGetHostPerformance, one request per
 * PdhCollectQueryData): the host's processes (its namespace's and its compute systems'), its
 * processors and memory, its network adapters.
 *
 * The counters (English names; PdhAddCounterW takes the same, as an English Windows does):
 *   \Processor(_Total)\% Processor Time          busy time of all processors, between the last
 *                                                two collections, in percent (capped at 100
 *                                                unless PDH_FMT_NOCAP100)
 *   \Process(_Total)\Working Set - Private       bytes, the last collection
 *   \Memory\Committed Bytes                      bytes, the last collection
 *   \Network Adapter(NAME or *)\Bytes Received/sec, Bytes Sent/sec, Packets Received/sec,
 *       Packets Sent/sec                         per second, between the last two collections
 *   \Network Adapter(NAME or *)\Packets Received Discarded, Packets Received Errors,
 *       Packets Outbound Discarded, Packets Outbound Errors   counts, the last collection
 * A path may start with \\MACHINE (any name: the counters are the emulated host's). Names
 * compare without case, as PDH's do. As Windows' PDH: an unknown object fails
 * PdhAddCounter with PDH_CSTATUS_NO_OBJECT, an unknown counter of a known object with
 * PDH_CSTATUS_NO_COUNTER, a path that does not parse with PDH_CSTATUS_BAD_COUNTERNAME; an
 * instance that does not exist is added and its value fails (PDH_INVALID_DATA, CStatus
 * PDH_CSTATUS_NO_INSTANCE); a rate before two collections fails (PDH_INVALID_DATA, CStatus
 * PDH_CSTATUS_INVALID_DATA: "rate counters require two counter values", PdhCollectQueryData's
 * documentation); a query without counters collects PDH_NO_DATA.
 *
 * Rates (% Processor Time and the /sec counters) are computed as PDH computes them, from the
 * raw values of the query's last two collections: "PDH stores the raw counter values for the
 * current and previous collection" (PdhCollectQueryData's documentation), so each query (kubelet
 * opens one per counter, and collects each every 10 s) has its own interval. % Processor Time
 * of _Total is the busy share of all processors over that interval, 0 to 100 whatever their
 * number (PERF_100NSEC_TIMER_INV: 100 × (1 − idle time / elapsed time), averaged over the
 * processors; capped at 100 unless PDH_FMT_NOCAP100), which is why kubelet multiplies it by
 * its processor count (pkg/kubelet/winstats perfcounter_nodestats_windows.go, convertCPUValue).
 * The busy time hcsemu reports never goes back (a process that exits keeps its time, as a
 * processor's busy time on Windows does); a raw value that still goes back reads 0.
 *
 * PdhGetFormattedCounterArrayW gives every instance its own CStatus ("Always check the
 * CStatus member of a counter value returned in the PDH structures", Microsoft's "Checking
 * Counter Data Status Codes"): a wildcard counter whose query has two collections succeeds,
 * and an instance without a value of its own (a network adapter first seen in the last
 * collection: one raw value, no rate) is an item with PDH_CSTATUS_INVALID_DATA. Observed, not
 * documented: Windows' clients read the array that way (telegraf's win_perf_counters keeps the
 * items whose CStatus is PDH_CSTATUS_VALID_DATA or PDH_CSTATUS_NEW_DATA after ERROR_SUCCESS),
 * and on Windows kubelet's node figures go on as containers' adapters come and go. Before, the
 * whole array failed (PDH_INVALID_DATA), kubelet's collectMetricsData returned at its first
 * failing network counter, so after each new pod the node's CPU, memory and network figures
 * stood still for one 10-s period per adapter rate counter (four; 50 s observed), and the first
 * CPU rate after that read 0.
 *
 * Assumptions (Windows' answers not documented): the counters' types (lpdwType) are those
 * typeperf -q shows for them (PERF_100NSEC_TIMER_INV, PERF_COUNTER_LARGE_RAWCOUNT,
 * PERF_COUNTER_BULK_COUNT, PERF_COUNTER_COUNTER, PERF_COUNTER_RAWCOUNT); a wildcard counter's
 * single value (PdhGetFormattedCounterValue) is PDH_INVALID_ARGUMENT; an object without
 * instances (Memory) gives one array item with an empty name; Processor and Process have the
 * _Total instance only (no per-processor or per-process instances); hcsemu unreachable fails
 * PdhCollectQueryData with PDH_CSTATUS_NO_MACHINE (the host's counters cannot be reached), and
 * the call's HRESULT is written to stderr, which PDH's status cannot carry.
 * A non-NULL data source (a log file) is PDH_NOT_IMPLEMENTED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "../common/emu.h"

typedef LONG PDH_STATUS;

#define PDH_OK 0L
#define PDH_CSTATUS_VALID_DATA 0x00000000L
#define PDH_CSTATUS_NO_MACHINE ((PDH_STATUS)0x800007D0L)
#define PDH_CSTATUS_NO_INSTANCE ((PDH_STATUS)0x800007D1L)
#define PDH_MORE_DATA ((PDH_STATUS)0x800007D2L)
#define PDH_NO_DATA ((PDH_STATUS)0x800007D5L)
#define PDH_CSTATUS_NO_OBJECT ((PDH_STATUS)0xC0000BB8L)
#define PDH_CSTATUS_NO_COUNTER ((PDH_STATUS)0xC0000BB9L)
#define PDH_CSTATUS_INVALID_DATA ((PDH_STATUS)0xC0000BBAL)
#define PDH_MEMORY_ALLOCATION_FAILURE ((PDH_STATUS)0xC0000BBBL)
#define PDH_INVALID_HANDLE ((PDH_STATUS)0xC0000BBCL)
#define PDH_INVALID_ARGUMENT ((PDH_STATUS)0xC0000BBDL)
#define PDH_CSTATUS_BAD_COUNTERNAME ((PDH_STATUS)0xC0000BC0L)
#define PDH_INVALID_DATA ((PDH_STATUS)0xC0000BC6L)
#define PDH_NOT_IMPLEMENTED ((PDH_STATUS)0xC0000BD3L)

#define PDH_FMT_LONG 0x00000100
#define PDH_FMT_DOUBLE 0x00000200
#define PDH_FMT_LARGE 0x00000400
#define PDH_FMT_NOSCALE 0x00001000
#define PDH_FMT_1000 0x00002000
#define PDH_FMT_NOCAP100 0x00008000

/* The counter types (PERF_COUNTER_RAWCOUNT, …) are winperf.h's, which windows.h includes. */

typedef struct {
	DWORD CStatus;
	union {
		LONG longValue;
		double doubleValue;
		LONGLONG largeValue;
		LPCSTR AnsiStringValue;
		LPCWSTR WideStringValue;
	};
} PDH_FMT_COUNTERVALUE;

typedef struct {
	LPWSTR szName;
	PDH_FMT_COUNTERVALUE FmtValue;
} PDH_FMT_COUNTERVALUE_ITEM_W;

/* ---- the counters ---- */

enum object { OBJ_PROCESSOR, OBJ_PROCESS, OBJ_MEMORY, OBJ_ADAPTER, OBJ_COUNT };
static const WCHAR *const object_names[OBJ_COUNT] = {L"Processor", L"Process", L"Memory", L"Network Adapter"};

enum field {
	F_BUSY,
	F_WSP,
	F_COMMITTED,
	/* the adapters' fields, in adapter_keys' order */
	F_BYTES_RX,
	F_BYTES_TX,
	F_PKTS_RX,
	F_PKTS_TX,
	F_RX_DISCARDED,
	F_RX_ERRORS,
	F_TX_DISCARDED,
	F_TX_ERRORS,
};
#define ADAPTER_FIELDS 8
static const char *const adapter_keys[ADAPTER_FIELDS] = {
    "bytesReceived",	       "bytesSent",		"packetsReceived",	     "packetsSent",
    "packetsReceivedDiscarded", "packetsReceivedErrors", "packetsOutboundDiscarded", "packetsOutboundErrors"};

enum kind { RAW, RATE, PERCENT_BUSY };

struct counter_def {
	enum object obj;
	const WCHAR *name;
	enum field field;
	enum kind kind;
	DWORD type;
};

static const struct counter_def defs[] = {
    {OBJ_PROCESSOR, L"% Processor Time", F_BUSY, PERCENT_BUSY, PERF_100NSEC_TIMER_INV},
    {OBJ_PROCESS, L"Working Set - Private", F_WSP, RAW, PERF_COUNTER_LARGE_RAWCOUNT},
    {OBJ_MEMORY, L"Committed Bytes", F_COMMITTED, RAW, PERF_COUNTER_LARGE_RAWCOUNT},
    {OBJ_ADAPTER, L"Bytes Received/sec", F_BYTES_RX, RATE, PERF_COUNTER_BULK_COUNT},
    {OBJ_ADAPTER, L"Bytes Sent/sec", F_BYTES_TX, RATE, PERF_COUNTER_BULK_COUNT},
    {OBJ_ADAPTER, L"Packets Received/sec", F_PKTS_RX, RATE, PERF_COUNTER_COUNTER},
    {OBJ_ADAPTER, L"Packets Sent/sec", F_PKTS_TX, RATE, PERF_COUNTER_COUNTER},
    {OBJ_ADAPTER, L"Packets Received Discarded", F_RX_DISCARDED, RAW, PERF_COUNTER_RAWCOUNT},
    {OBJ_ADAPTER, L"Packets Received Errors", F_RX_ERRORS, RAW, PERF_COUNTER_RAWCOUNT},
    {OBJ_ADAPTER, L"Packets Outbound Discarded", F_TX_DISCARDED, RAW, PERF_COUNTER_RAWCOUNT},
    {OBJ_ADAPTER, L"Packets Outbound Errors", F_TX_ERRORS, RAW, PERF_COUNTER_RAWCOUNT},
};
#define NDEFS (sizeof(defs) / sizeof(defs[0]))

/* ---- samples ---- */

#define MAX_ADAPTERS 64
#define NAME_MAX_CHARS 128

struct adapter {
	WCHAR name[NAME_MAX_CHARS];
	unsigned long long v[ADAPTER_FIELDS];
};

struct sample {
	int valid;
	long long ts; /* ns, hcsemu's monotonic clock */
	int processors;
	unsigned long long busy, wsp, committed;
	int nad;
	struct adapter ad[MAX_ADAPTERS];
};

static unsigned long long num(struct jv obj, const char *key)
{
	struct jv v;
	return json_find(obj, key, &v) ? json_u64(v) : 0;
}

/* fetch asks hcsemu for a sample. */
static PDH_STATUS fetch(struct sample *s)
{
	char *reply = NULL;
	struct jv r, ads, a, v;
	HRESULT hr = emu_call("GetHostPerformance", "{}", &reply);
	int i;

	if (FAILED(hr) || reply == NULL) {
		/* PDH's status cannot say why; the stand-ins tell stderr, as emu.c's complain does. */
		fprintf(stderr, "pdh stand-in DLL: PdhCollectQueryData: hcsemu's GetHostPerformance failed: HRESULT 0x%08lx%s\n",
			(unsigned long)hr, reply == NULL && SUCCEEDED(hr) ? " (no reply)" : "");
		free(reply);
		return PDH_CSTATUS_NO_MACHINE;
	}
	memset(s, 0, sizeof(*s));
	r.p = reply;
	r.end = reply + strlen(reply);
	s->ts = (long long)num(r, "timestampNs");
	s->processors = (int)num(r, "processors");
	s->busy = num(r, "processorBusyNs");
	s->wsp = num(r, "workingSetPrivateBytes");
	s->committed = num(r, "committedBytes");
	if (json_find(r, "adapters", &ads)) {
		for (i = 0; s->nad < MAX_ADAPTERS && json_index(ads, i, &a); i++) {
			struct adapter *d = &s->ad[s->nad];
			char *name = json_find(a, "name", &v) ? json_string(v) : NULL;
			int k;

			if (name == NULL)
				continue;
			if (MultiByteToWideChar(CP_UTF8, 0, name, -1, d->name, NAME_MAX_CHARS) == 0) {
				free(name);
				continue;
			}
			free(name);
			for (k = 0; k < ADAPTER_FIELDS; k++)
				d->v[k] = num(a, adapter_keys[k]);
			s->nad++;
		}
	}
	s->valid = 1;
	free(reply);
	return PDH_OK;
}

/* ---- handles ---- */

struct query;

struct counter {
	struct counter *next;
	struct query *q;
	const struct counter_def *def;
	WCHAR *instance; /* NULL: none given; L"*": every instance */
	DWORD_PTR user;
};

struct query {
	struct query *next;
	struct counter *counters;
	struct sample prev, cur;
	DWORD_PTR user;
};

static CRITICAL_SECTION mu;
static struct query *queries;

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
	(void)inst;
	(void)reserved;
	if (reason == DLL_PROCESS_ATTACH)
		InitializeCriticalSection(&mu);
	return TRUE;
}

/* find_query and find_counter validate a handle; mu is held. */
static struct query *find_query(HANDLE h)
{
	struct query *q;

	for (q = queries; q != NULL; q = q->next)
		if ((HANDLE)q == h)
			return q;
	return NULL;
}

static struct counter *find_counter(HANDLE h)
{
	struct query *q;
	struct counter *c;

	for (q = queries; q != NULL; q = q->next)
		for (c = q->counters; c != NULL; c = c->next)
			if ((HANDLE)c == h)
				return c;
	return NULL;
}

/* ---- paths ---- */

/*
 * parse_path splits \\MACHINE\Object(Instance)\Counter (machine and instance optional) and
 * finds the counter: *def, and *instance (malloc'd, or NULL when none) on success.
 */
static PDH_STATUS parse_path(LPCWSTR path, const struct counter_def **def, WCHAR **instance)
{
	const WCHAR *p, *last, *open = NULL, *obj_end;
	size_t obj_len;
	int obj = -1, i;

	*def = NULL;
	*instance = NULL;
	if (path == NULL)
		return PDH_INVALID_ARGUMENT;
	p = path;
	if (p[0] == L'\\' && p[1] == L'\\') {
		p = wcschr(p + 2, L'\\');
		if (p == NULL)
			return PDH_CSTATUS_BAD_COUNTERNAME;
	}
	if (p[0] != L'\\')
		return PDH_CSTATUS_BAD_COUNTERNAME;
	p++;
	last = wcsrchr(p, L'\\');
	if (last == NULL || last == p || last[1] == 0)
		return PDH_CSTATUS_BAD_COUNTERNAME;
	obj_end = last;
	if (obj_end[-1] == L')') {
		for (open = p; open < obj_end && *open != L'('; open++)
			;
		if (open == obj_end || open == p || open + 1 == obj_end - 1)
			return PDH_CSTATUS_BAD_COUNTERNAME;
		obj_end = open;
	}
	obj_len = (size_t)(obj_end - p);
	for (i = 0; i < OBJ_COUNT; i++)
		if (wcslen(object_names[i]) == obj_len && _wcsnicmp(object_names[i], p, obj_len) == 0)
			obj = i;
	if (obj < 0)
		return PDH_CSTATUS_NO_OBJECT;
	for (i = 0; i < (int)NDEFS; i++)
		if (defs[i].obj == (enum object)obj && _wcsicmp(defs[i].name, last + 1) == 0)
			*def = &defs[i];
	if (*def == NULL)
		return PDH_CSTATUS_NO_COUNTER;
	if (open != NULL) {
		size_t n = (size_t)(last - 1 - (open + 1));
		*instance = malloc((n + 1) * sizeof(WCHAR));
		if (*instance == NULL)
			return PDH_MEMORY_ALLOCATION_FAILURE;
		memcpy(*instance, open + 1, n * sizeof(WCHAR));
		(*instance)[n] = 0;
	}
	return PDH_OK;
}

/* ---- values ---- */

/* raw_of is a field of one instance (ad: the adapter, for adapter fields) in a sample. */
static unsigned long long raw_of(const struct sample *s, enum field f, const struct adapter *ad)
{
	switch (f) {
	case F_BUSY:
		return s->busy;
	case F_WSP:
		return s->wsp;
	case F_COMMITTED:
		return s->committed;
	default:
		return ad != NULL ? ad->v[f - F_BYTES_RX] : 0;
	}
}

static const struct adapter *adapter_in(const struct sample *s, const WCHAR *name)
{
	int i;

	for (i = 0; i < s->nad; i++)
		if (_wcsicmp(s->ad[i].name, name) == 0)
			return &s->ad[i];
	return NULL;
}

/*
 * value computes one instance's value (name: the adapter's, or _Total / NULL for the others)
 * into *out as a double; it returns the CStatus.
 */
static DWORD value(const struct query *q, const struct counter_def *d, const WCHAR *name, DWORD fmt, double *out)
{
	const struct adapter *cur = NULL, *prev = NULL;
	double v, secs;

	*out = 0;
	if (!q->cur.valid)
		return (DWORD)PDH_CSTATUS_INVALID_DATA;
	if (d->obj == OBJ_ADAPTER) {
		if (name == NULL || (cur = adapter_in(&q->cur, name)) == NULL)
			return (DWORD)PDH_CSTATUS_NO_INSTANCE;
	} else if (d->obj == OBJ_MEMORY) {
		if (name != NULL)
			return (DWORD)PDH_CSTATUS_NO_INSTANCE;
	} else if (name == NULL || _wcsicmp(name, L"_Total") != 0) {
		return (DWORD)PDH_CSTATUS_NO_INSTANCE;
	}
	if (d->kind == RAW) {
		v = (double)raw_of(&q->cur, d->field, cur);
	} else {
		if (!q->prev.valid || q->cur.ts <= q->prev.ts)
			return (DWORD)PDH_CSTATUS_INVALID_DATA;
		if (d->obj == OBJ_ADAPTER && (prev = adapter_in(&q->prev, name)) == NULL)
			return (DWORD)PDH_CSTATUS_INVALID_DATA; /* a new adapter: one sample only */
		secs = (double)(q->cur.ts - q->prev.ts) / 1e9;
		/* A counter that went back (an adapter made again) reads 0, as PDH's do. */
		v = raw_of(&q->cur, d->field, cur) < raw_of(&q->prev, d->field, prev)
			? 0
			: (double)(raw_of(&q->cur, d->field, cur) - raw_of(&q->prev, d->field, prev));
		if (d->kind == PERCENT_BUSY) {
			int n = q->cur.processors > 0 ? q->cur.processors : 1;
			v = v / 1e9 / (secs * n) * 100.0;
			if (v > 100.0 && !(fmt & PDH_FMT_NOCAP100))
				v = 100.0;
		} else {
			v = v / secs;
		}
	}
	if (fmt & PDH_FMT_1000)
		v *= 1000.0;
	*out = v;
	return PDH_CSTATUS_VALID_DATA;
}

static int valid_format(DWORD fmt)
{
	DWORD t = fmt & (PDH_FMT_LONG | PDH_FMT_DOUBLE | PDH_FMT_LARGE);
	return t == PDH_FMT_LONG || t == PDH_FMT_DOUBLE || t == PDH_FMT_LARGE;
}

static void put(PDH_FMT_COUNTERVALUE *cv, DWORD status, double v, DWORD fmt)
{
	memset(cv, 0, sizeof(*cv));
	cv->CStatus = status;
	if (status != PDH_CSTATUS_VALID_DATA)
		return;
	if (fmt & PDH_FMT_DOUBLE)
		cv->doubleValue = v;
	else if (fmt & PDH_FMT_LARGE)
		cv->largeValue = (LONGLONG)v;
	else
		cv->longValue = (LONG)v;
}

/* ---- the API ---- */

__declspec(dllexport) PDH_STATUS WINAPI PdhOpenQueryW(LPCWSTR source, DWORD_PTR user, HANDLE *query)
{
	struct query *q;

	if (query == NULL)
		return PDH_INVALID_ARGUMENT;
	if (source != NULL && source[0] != 0)
		return PDH_NOT_IMPLEMENTED;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return PDH_MEMORY_ALLOCATION_FAILURE;
	q->user = user;
	EnterCriticalSection(&mu);
	q->next = queries;
	queries = q;
	LeaveCriticalSection(&mu);
	*query = (HANDLE)q;
	return PDH_OK;
}

/* PdhOpenQuery is pdh.dll's undecorated export of PdhOpenQueryW, which win_pdh binds. */
__declspec(dllexport) PDH_STATUS WINAPI PdhOpenQuery(LPCWSTR source, DWORD_PTR user, HANDLE *query)
{
	return PdhOpenQueryW(source, user, query);
}

static PDH_STATUS add_counter(HANDLE query, LPCWSTR path, DWORD_PTR user, HANDLE *counter)
{
	const struct counter_def *def;
	WCHAR *instance;
	struct counter *c;
	struct query *q;
	PDH_STATUS st;

	if (counter == NULL)
		return PDH_INVALID_ARGUMENT;
	st = parse_path(path, &def, &instance);
	if (st != PDH_OK)
		return st;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		free(instance);
		return PDH_MEMORY_ALLOCATION_FAILURE;
	}
	c->def = def;
	c->instance = instance;
	c->user = user;
	EnterCriticalSection(&mu);
	q = find_query(query);
	if (q == NULL) {
		LeaveCriticalSection(&mu);
		free(instance);
		free(c);
		return PDH_INVALID_HANDLE;
	}
	c->q = q;
	c->next = q->counters;
	q->counters = c;
	LeaveCriticalSection(&mu);
	*counter = (HANDLE)c;
	return PDH_OK;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhAddCounterW(HANDLE query, LPCWSTR path, DWORD_PTR user, HANDLE *counter)
{
	return add_counter(query, path, user, counter);
}

__declspec(dllexport) PDH_STATUS WINAPI PdhAddEnglishCounterW(HANDLE query, LPCWSTR path, DWORD_PTR user, HANDLE *counter)
{
	return add_counter(query, path, user, counter);
}

__declspec(dllexport) PDH_STATUS WINAPI PdhRemoveCounter(HANDLE counter)
{
	struct counter *c, **pp;

	EnterCriticalSection(&mu);
	c = find_counter(counter);
	if (c == NULL) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_HANDLE;
	}
	for (pp = &c->q->counters; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	LeaveCriticalSection(&mu);
	free(c->instance);
	free(c);
	return PDH_OK;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhCloseQuery(HANDLE query)
{
	struct query *q, **pp;
	struct counter *c, *next;

	EnterCriticalSection(&mu);
	q = find_query(query);
	if (q == NULL) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_HANDLE;
	}
	for (pp = &queries; *pp != q; pp = &(*pp)->next)
		;
	*pp = q->next;
	LeaveCriticalSection(&mu);
	for (c = q->counters; c != NULL; c = next) {
		next = c->next;
		free(c->instance);
		free(c);
	}
	free(q);
	return PDH_OK;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhCollectQueryData(HANDLE query)
{
	struct sample *s;
	struct query *q;
	PDH_STATUS st;

	EnterCriticalSection(&mu);
	q = find_query(query);
	st = q == NULL ? PDH_INVALID_HANDLE : q->counters == NULL ? PDH_NO_DATA : PDH_OK;
	LeaveCriticalSection(&mu);
	if (st != PDH_OK)
		return st;
	/* The request goes without the lock; the handle is checked again after it. */
	s = malloc(sizeof(*s));
	if (s == NULL)
		return PDH_MEMORY_ALLOCATION_FAILURE;
	st = fetch(s);
	if (st == PDH_OK) {
		EnterCriticalSection(&mu);
		q = find_query(query);
		if (q == NULL) {
			st = PDH_INVALID_HANDLE;
		} else {
			q->prev = q->cur;
			q->cur = *s;
		}
		LeaveCriticalSection(&mu);
	}
	free(s);
	return st;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhGetFormattedCounterValue(HANDLE counter, DWORD fmt, LPDWORD type, PDH_FMT_COUNTERVALUE *out)
{
	struct counter *c;
	DWORD status;
	double v;

	if (out == NULL || !valid_format(fmt))
		return PDH_INVALID_ARGUMENT;
	EnterCriticalSection(&mu);
	c = find_counter(counter);
	if (c == NULL) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_HANDLE;
	}
	if (c->instance != NULL && wcscmp(c->instance, L"*") == 0) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_ARGUMENT;
	}
	if (type != NULL)
		*type = c->def->type;
	status = value(c->q, c->def, c->instance, fmt, &v);
	LeaveCriticalSection(&mu);
	put(out, status, v, fmt);
	return status == PDH_CSTATUS_VALID_DATA ? PDH_OK : PDH_INVALID_DATA;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhGetFormattedCounterArrayW(HANDLE counter, DWORD fmt, LPDWORD size, LPDWORD count,
								     PDH_FMT_COUNTERVALUE_ITEM_W *items)
{
	const WCHAR *names[MAX_ADAPTERS + 1];
	static const WCHAR total[] = L"_Total", empty[] = L"";
	DWORD need, n = 0, i, status;
	struct counter *c;
	WCHAR *strings;
	double v;

	if (size == NULL || count == NULL || !valid_format(fmt))
		return PDH_INVALID_ARGUMENT;
	EnterCriticalSection(&mu);
	c = find_counter(counter);
	if (c == NULL) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_HANDLE;
	}
	/* No collection yet, or a rate with one: the counter itself has no value. */
	if (!c->q->cur.valid || (c->def->kind != RAW && !c->q->prev.valid)) {
		LeaveCriticalSection(&mu);
		return PDH_INVALID_DATA;
	}
	if (c->instance != NULL && wcscmp(c->instance, L"*") == 0) {
		if (c->def->obj == OBJ_ADAPTER)
			for (i = 0; i < (DWORD)c->q->cur.nad; i++)
				names[n++] = c->q->cur.ad[i].name;
		else
			names[n++] = c->def->obj == OBJ_MEMORY ? empty : total;
	} else {
		names[n++] = c->instance != NULL ? c->instance : empty;
	}
	/*
	 * Each item carries its own CStatus and the call succeeds: an instance that has no value
	 * (an adapter first seen in the last collection has one sample, so no rate yet) is an item
	 * with PDH_CSTATUS_INVALID_DATA and 0, while the others keep theirs (see the file's comment).
	 */
	need = n * sizeof(PDH_FMT_COUNTERVALUE_ITEM_W);
	for (i = 0; i < n; i++)
		need += (DWORD)((wcslen(names[i]) + 1) * sizeof(WCHAR));
	if (items == NULL || *size < need) {
		*size = need;
		*count = n;
		LeaveCriticalSection(&mu);
		return PDH_MORE_DATA;
	}
	strings = (WCHAR *)(items + n);
	for (i = 0; i < n; i++) {
		size_t len = wcslen(names[i]) + 1;

		status = value(c->q, c->def, names[i][0] == 0 ? NULL : names[i], fmt, &v);
		memcpy(strings, names[i], len * sizeof(WCHAR));
		items[i].szName = strings;
		put(&items[i].FmtValue, status, v, fmt);
		strings += len;
	}
	*size = need;
	*count = n;
	LeaveCriticalSection(&mu);
	return PDH_OK;
}

__declspec(dllexport) PDH_STATUS WINAPI PdhValidatePathW(LPCWSTR path)
{
	const struct counter_def *def;
	WCHAR *instance;
	PDH_STATUS st = parse_path(path, &def, &instance);

	free(instance);
	return st;
}
