/*
 * computecore.c: a stand-in for Windows' computecore.dll (the HCS API) that forwards every call
 * to the hcsemu daemon over loopback TCP, so that the Windows build of runhcs, with its real
 * mkwinsyscall bindings (internal/computecore/zsyscall_windows.go), runs under Wine against the
 * same emulator the Linux build uses. Only for tests: it is installed in the private Wine
 * prefix by hack/wine/setup.sh and nowhere else.
 *
 * The API is computecore.h's (https://learn.microsoft.com/virtualization/api/hcs/reference/apioverview):
 * every function the project binds (internal/computecore/syscall_windows.go) is exported with
 * the same name and arguments. Semantics kept from HCS:
 *   - operations: HcsCreateOperation with an optional completion callback, then one call that
 *     uses it; HcsWaitForOperationResult / HcsGetOperationResult return the HRESULT and a result
 *     document allocated with LocalAlloc, which the caller frees with LocalFree;
 *   - completion callbacks and system/process notifications run on a thread of this DLL's
 *     (one dispatcher thread, in order), never on the caller's;
 *   - HRESULTs from the emulator are passed through unchanged;
 *   - a process's stdio are Windows pipe handles the caller owns; this DLL relays each one to
 *     the emulated process over its own TCP connection.
 *
 * The protocol is hcsemu's (internal/hcsemu/wire): frames of a 4-byte big-endian length and
 * JSON; requests {id, method, args}, responses {id, hresult, result, reply}, events {event}.
 * TCP cannot carry file descriptors, so stdio differs from the unix-socket transport: a reply
 * that has stdio carries "stdioToken" instead of descriptors, and for each std stream this DLL
 * opens a new connection whose first frame is the request
 *   {"id":1,"method":"AttachStdio","args":{"token":T,"slot":S}}   (S: 0 stdin, 1 stdout, 2 stderr)
 * after which the connection carries that stream's raw bytes (stdin: to the process, a
 * half-close is end of input; stdout/stderr: from the process, closed at end of output).
 * A host named pipe mapped into a container is opened here and relayed the same way, on an
 * AttachPipe connection ("mapped pipes" below).
 * hack/wine/README.md has the whole contract.
 *
 * The daemon's address is HCSEMU_TCP_ADDRESS (host:port, e.g. 127.0.0.1:9345).
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emu.h"

#define EXPORT __declspec(dllexport)

/* ---- computecore.h types and values ---- */

typedef void *HCS_OPERATION;
typedef void *HCS_SYSTEM;
typedef void *HCS_PROCESS;
typedef void(CALLBACK *HCS_OPERATION_COMPLETION)(HCS_OPERATION operation, void *context);

typedef struct {
	DWORD Type;
	PCWSTR EventData;
	HCS_OPERATION Operation;
} HCS_EVENT;
typedef void(CALLBACK *HCS_EVENT_CALLBACK)(const HCS_EVENT *event, void *context);

typedef struct {
	DWORD ProcessId;
	DWORD Reserved;
	HANDLE StdInput;
	HANDLE StdOutput;
	HANDLE StdError;
} HCS_PROCESS_INFORMATION;

enum {
	OP_NONE = -1,
	OP_ENUMERATE = 0,
	OP_CREATE = 1,
	OP_START = 2,
	OP_SHUTDOWN = 3,
	OP_PAUSE = 4,
	OP_RESUME = 5,
	OP_TERMINATE = 7,
	OP_MODIFY = 8,
	OP_GET_PROPERTIES = 9,
	OP_CREATE_PROCESS = 10,
	OP_SIGNAL_PROCESS = 11,
	OP_GET_PROCESS_INFO = 12,
	OP_GET_PROCESS_PROPERTIES = 13,
	OP_MODIFY_PROCESS = 14,
};

#define EVENT_SYSTEM_EXITED 0x00000001u
#define EVENT_PROCESS_EXITED 0x00010000u
#define EVENT_OPERATION_CALLBACK 0x01000000u
#define EVENT_SERVICE_DISCONNECT 0x02000000u

/* HRESULTs (HCS HRESULT reference, winerror.h). */
#define HR_OK ((HRESULT)0)
#define HR_INVALIDARG ((HRESULT)0x80070057L)
#define HR_OUTOFMEMORY ((HRESULT)0x8007000EL)
#define HR_HANDLE ((HRESULT)0x80070006L)
#define HR_WAIT_TIMEOUT ((HRESULT)0x80070102L)
#define HR_OPERATION_NOT_STARTED ((HRESULT)0x80370115L)
#define HR_OPERATION_ALREADY_STARTED ((HRESULT)0x80370116L)
#define HR_OPERATION_PENDING ((HRESULT)0x80370117L)
#define HR_SERVICE_NOT_AVAILABLE ((HRESULT)0x80370114L)
#define HR_SERVICE_DISCONNECT ((HRESULT)0x8037011EL)
#define HR_PROTOCOL_ERROR ((HRESULT)0x80370111L)

/* CLOSE_WAIT_MS bounds how long closing a handle waits for the daemon's answer. */
#define CLOSE_WAIT_MS 30000

/* ---- handles ---- */

struct sys {
	LONG refs;
	char *id;
	unsigned long long instance;
	HCS_EVENT_CALLBACK cb;
	void *ctx;
	int exited;
	char *exit_doc;
	HANDLE exited_ev;
	int closed;
	struct sys *next;
};

struct proc {
	LONG refs;
	char *sys_id;
	unsigned long long instance;
	DWORD pid;
	HCS_EVENT_CALLBACK cb;
	void *ctx;
	int exited;
	char *exit_doc;
	HANDLE exited_ev;
	int closed;
	struct relay *stdin_relay; /* this handle's stdin stream, for CloseHandle(StdIn) */
	struct proc *next;
};

enum op_state { OPS_IDLE, OPS_PENDING, OPS_DONE };

struct op {
	LONG refs;
	void *ctx;
	HCS_OPERATION_COMPLETION cb;
	HANDLE done;
	enum op_state state;
	int type;
	unsigned long long request; /* the request id while pending, then its id */
	HRESULT hr;
	char *result;
	struct sys *sys;
	struct proc *proc;
	HCS_PROCESS_INFORMATION info;
	int closed;
};

/* What a response must update, besides the operation. */
enum reply_kind { R_PLAIN, R_SYSTEM, R_PROCESS };

struct request {
	unsigned long long id;
	enum reply_kind kind;
	struct op *op;       /* NULL for a synchronous call */
	struct sys *sys;     /* R_SYSTEM: the handle to fill */
	struct proc *proc;   /* R_PROCESS: the handle to fill */
	HANDLE done;         /* synchronous calls wait on it */
	HRESULT hr;
	char *result;
	HCS_PROCESS_INFORMATION info;
	struct request *next;
};

/* Work for the dispatcher thread: an operation's completion or a handle's event. */
struct work {
	struct op *op;
	HCS_EVENT_CALLBACK cb;
	void *ctx;
	DWORD type;
	WCHAR *data;
	struct work *next;
};

static CRITICAL_SECTION mu;      /* guards everything below but sending */
static CRITICAL_SECTION send_mu; /* one frame at a time on the socket */
static CONDITION_VARIABLE work_cv;
static INIT_ONCE init_once = INIT_ONCE_STATIC_INIT;

static SOCKET sock = INVALID_SOCKET;
static int disconnected;
static unsigned long long next_id;
static struct request *pending;
static struct sys *systems;
static struct proc *procs;
static struct work *work_head, *work_tail;
static int dispatcher_started;

/* ---- references (all under mu) ---- */

static void sys_release(struct sys *s)
{
	if (s == NULL || --s->refs > 0)
		return;
	free(s->id);
	free(s->exit_doc);
	CloseHandle(s->exited_ev);
	free(s);
}

static void relay_release(struct relay *r);

static void proc_release(struct proc *p)
{
	if (p == NULL || --p->refs > 0)
		return;
	relay_release(p->stdin_relay);
	free(p->sys_id);
	free(p->exit_doc);
	CloseHandle(p->exited_ev);
	free(p);
}

static void op_release(struct op *o)
{
	if (o == NULL || --o->refs > 0)
		return;
	free(o->result);
	CloseHandle(o->done);
	sys_release(o->sys);
	proc_release(o->proc);
	free(o);
}

/* ---- the dispatcher thread ---- */

static DWORD WINAPI dispatcher(void *unused)
{
	(void)unused;
	for (;;) {
		struct work *w;

		EnterCriticalSection(&mu);
		while (work_head == NULL)
			SleepConditionVariableCS(&work_cv, &mu, INFINITE);
		w = work_head;
		work_head = w->next;
		if (work_head == NULL)
			work_tail = NULL;
		LeaveCriticalSection(&mu);

		if (w->op != NULL) {
			if (w->op->cb != NULL)
				w->op->cb((HCS_OPERATION)w->op, w->op->ctx);
			EnterCriticalSection(&mu);
			op_release(w->op);
			LeaveCriticalSection(&mu);
		} else if (w->cb != NULL) {
			HCS_EVENT ev = {w->type, w->data, NULL};

			w->cb(&ev, w->ctx);
		}
		free(w->data);
		free(w);
	}
	return 0;
}

/* queue_work hands work to the dispatcher (under mu). */
static void queue_work(struct work *w)
{
	if (!dispatcher_started) {
		HANDLE t = CreateThread(NULL, 0, dispatcher, NULL, 0, NULL);

		if (t == NULL) {
			free(w->data);
			free(w);
			return;
		}
		CloseHandle(t);
		dispatcher_started = 1;
	}
	w->next = NULL;
	if (work_tail != NULL)
		work_tail->next = w;
	else
		work_head = w;
	work_tail = w;
	WakeConditionVariable(&work_cv);
}

static void queue_event(HCS_EVENT_CALLBACK cb, void *ctx, DWORD type, const char *data)
{
	struct work *w;

	if (cb == NULL)
		return;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return;
	w->cb = cb;
	w->ctx = ctx;
	w->type = type;
	w->data = wide_of(data, 0);
	queue_work(w);
}

/* complete_op records an operation's outcome and runs its callback (under mu). */
static void complete_op(struct op *o, HRESULT hr, char *result)
{
	struct work *w;

	o->hr = hr;
	free(o->result);
	o->result = result;
	o->state = OPS_DONE;
	SetEvent(o->done);
	if (o->cb == NULL || o->closed)
		return;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return;
	o->refs++;
	w->op = o;
	queue_work(w);
}

/* ---- the connection ---- */

static int send_frame(SOCKET s, const char *json, size_t n)
{
	int ok;

	EnterCriticalSection(&send_mu);
	ok = frame_write(s, json, n);
	LeaveCriticalSection(&send_mu);
	return ok;
}

/* ---- stdio relays ---- */

struct relay {
	LONG refs; /* the thread's, and the process handle's for a stdin relay */
	SOCKET s;
	HANDLE h;
	int in; /* 1: pipe -> socket (stdin); 0: socket -> pipe (stdout, stderr) */
	HANDLE thread;
	HANDLE done;	/* set once a stdin relay has ended and the daemon took all of it */
	volatile LONG stopping; /* CloseHandle(StdIn) asked the stdin relay to finish */
};

static void relay_release(struct relay *r)
{
	if (r == NULL || InterlockedDecrement(&r->refs) > 0)
		return;
	CloseHandle(r->thread);
	CloseHandle(r->done);
	free(r);
}

/* drain_stdin sends what is in the stdin pipe now, without waiting for more. */
static void drain_stdin(struct relay *r, char *b, DWORD size)
{
	DWORD avail, n;

	while (PeekNamedPipe(r->h, NULL, 0, NULL, &avail, NULL) && avail > 0) {
		if (!ReadFile(r->h, b, avail < size ? avail : size, &n, NULL) || n == 0)
			return;
		if (!send_all(r->s, b, (int)n))
			return;
	}
}

static DWORD WINAPI relay_thread(void *arg)
{
	struct relay *r = arg;
	char b[16384];

	for (;;) {
		DWORD n;

		if (r->in) {
			/* After CloseHandle(StdIn) (relay_finish), what the caller wrote before it is
			 * sent, and nothing after. */
			if (r->stopping) {
				drain_stdin(r, b, sizeof(b));
				break;
			}
			if (!ReadFile(r->h, b, sizeof(b), &n, NULL) || n == 0) {
				if (r->stopping && GetLastError() == ERROR_OPERATION_ABORTED)
					continue;
				break;
			}
			if (!send_all(r->s, b, (int)n))
				break;
		} else {
			int k = recv(r->s, b, sizeof(b), 0);

			if (k <= 0)
				break;
			if (!WriteFile(r->h, b, (DWORD)k, &n, NULL))
				break;
		}
	}
	if (r->in) {
		shutdown(r->s, SD_SEND); /* end of input for the process */
		if (r->stopping) {
			/* The daemon closes the stream once all of it is in the process's pipe. */
			DWORD ms = 10000;

			setsockopt(r->s, SOL_SOCKET, SO_RCVTIMEO, (const char *)&ms, sizeof(ms));
			while (recv(r->s, b, sizeof(b), 0) > 0)
				;
		}
		SetEvent(r->done);
	}
	closesocket(r->s);
	CloseHandle(r->h);
	relay_release(r);
	return 0;
}

/*
 * relay_finish ends a stdin relay for CloseHandle(StdIn): the bytes the caller wrote before are
 * relayed, the stream is half-closed, and the call returns once the daemon has all of them, so
 * that the daemon's CloseHandle that follows cannot overtake them (on Windows the caller writes
 * straight into the process's pipe, so nothing can be in flight). A blocked read is woken with
 * CancelSynchronousIo, retried because the thread may be just about to block.
 */
static void relay_finish(struct relay *r)
{
	int i;

	InterlockedExchange(&r->stopping, 1);
	for (i = 0; i < 1000; i++) {
		CancelSynchronousIo(r->thread);
		if (WaitForSingleObject(r->done, 10) == WAIT_OBJECT_0)
			break;
	}
}

/* is_close_stdin says a ModifyProcess settings document is CloseHandle of StdIn
 * (schema2.ProcessModifyRequest). */
static int is_close_stdin(PCWSTR settings)
{
	char *s = utf8_of(settings), *op = NULL, *h = NULL;
	struct jv doc, v, c;
	int yes = 0;

	if (s == NULL)
		return 0;
	doc.p = s;
	doc.end = s + strlen(s);
	if (json_find(doc, "Operation", &v) && (op = json_string(v)) != NULL && strcmp(op, "CloseHandle") == 0 &&
	    json_find(doc, "CloseHandle", &c) && json_find(c, "Handle", &v) && (h = json_string(v)) != NULL)
		yes = strcmp(h, "StdIn") == 0;
	free(op);
	free(h);
	free(s);
	return yes;
}

/* attach_stdio connects one std stream and returns the caller's end of its pipe, or NULL; for
 * stdin, *stdin_relay holds a reference on its relay. */
static HANDLE attach_stdio(const char *token, int slot, struct relay **stdin_relay)
{
	struct buf f = {0};
	char num[32];
	HANDLE rd, wr, mine, theirs, t;
	struct relay *r;
	SOCKET s = emu_dial();

	if (s == INVALID_SOCKET)
		return NULL;
	snprintf(num, sizeof(num), "%d", slot);
	if (!(buf_adds(&f, "{\"id\":1,\"method\":\"AttachStdio\",\"args\":{\"token\":") && buf_add_string(&f, token) &&
	      buf_adds(&f, ",\"slot\":") && buf_adds(&f, num) && buf_adds(&f, "}}")) ||
	    !send_frame(s, f.data, f.len)) {
		buf_free(&f);
		closesocket(s);
		return NULL;
	}
	buf_free(&f);
	if (!CreatePipe(&rd, &wr, NULL, 0)) {
		closesocket(s);
		return NULL;
	}
	mine = slot == 0 ? rd : wr;
	theirs = slot == 0 ? wr : rd;
	r = malloc(sizeof(*r));
	if (r == NULL) {
		CloseHandle(rd);
		CloseHandle(wr);
		closesocket(s);
		return NULL;
	}
	r->s = s;
	r->h = mine;
	r->in = slot == 0;
	r->stopping = 0;
	r->refs = r->in ? 2 : 1;
	r->done = CreateEventW(NULL, TRUE, FALSE, NULL);
	t = r->done == NULL ? NULL : CreateThread(NULL, 0, relay_thread, r, CREATE_SUSPENDED, NULL);
	if (t == NULL) {
		if (r->done != NULL)
			CloseHandle(r->done);
		free(r);
		CloseHandle(rd);
		CloseHandle(wr);
		closesocket(s);
		return NULL;
	}
	r->thread = t;
	if (r->in)
		*stdin_relay = r;
	ResumeThread(t);
	return theirs;
}

/* ---- mapped pipes ----
 *
 * A process of a container opened a host named pipe mapped into it (Container.MappedPipes).
 * The host pipe lives here, on the Windows side (under Wine, in wineserver), where hcsemu
 * cannot open it, so the daemon sends an event {"pipe":{"hostPath":P,"token":T}} on the control
 * connection, and this DLL opens P as a pipe client, as HCS does for the container on Windows,
 * and then a connection whose first frame is
 *   {"id":1,"method":"AttachPipe","args":{"token":T,"error":E}}
 * (E: the Win32 error of the open, 0 when it is open; with an error nothing follows and the
 * container's open fails). The connection then carries the pipe's bytes both ways, one thread
 * each way. A Windows pipe has no half-close: the end of the container's side closes the pipe,
 * and the pipe's end (its server closed it) is a half-close to the daemon.
 */

/* PIPE_BUSY_WAIT_MS bounds how long an open waits for a busy pipe's server (assumption: a
 * client's usual WaitNamedPipe). */
#define PIPE_BUSY_WAIT_MS 10000

struct pipe_relay {
	char *host;
	char *token;
	HANDLE h;
	SOCKET s;
	HANDLE reader;      /* the pipe -> socket thread */
	HANDLE reader_done; /* set when it has ended */
	volatile LONG container_closed;
};

static void pipe_relay_free(struct pipe_relay *r)
{
	if (r->h != NULL && r->h != INVALID_HANDLE_VALUE)
		CloseHandle(r->h);
	if (r->s != INVALID_SOCKET)
		closesocket(r->s);
	if (r->reader != NULL)
		CloseHandle(r->reader);
	if (r->reader_done != NULL)
		CloseHandle(r->reader_done);
	free(r->host);
	free(r->token);
	free(r);
}

/* pipe_to_socket relays what the host pipe's server writes to the container. */
static DWORD WINAPI pipe_to_socket(void *arg)
{
	struct pipe_relay *r = arg;
	char b[16384];

	for (;;) {
		DWORD n = 0;

		if (!ReadFile(r->h, b, sizeof(b), &n, NULL) && GetLastError() != ERROR_MORE_DATA)
			break; /* the server closed the pipe, or the container's side ended (cancelled) */
		if (n > 0 && !send_all(r->s, b, (int)n))
			break;
	}
	shutdown(r->s, SD_SEND);
	SetEvent(r->reader_done);
	return 0;
}

/* socket_to_pipe relays what the container writes to the host pipe; at the container's end it
 * stops the other direction, whose read is woken with CancelSynchronousIo (retried: the thread
 * may be just about to block, as relay_finish does). */
static DWORD WINAPI socket_to_pipe(void *arg)
{
	struct pipe_relay *r = arg;
	char b[16384];

	for (;;) {
		DWORD n;
		int k = recv(r->s, b, sizeof(b), 0);

		if (k <= 0 || !WriteFile(r->h, b, (DWORD)k, &n, NULL))
			break;
	}
	InterlockedExchange(&r->container_closed, 1);
	while (WaitForSingleObject(r->reader_done, 10) != WAIT_OBJECT_0)
		CancelSynchronousIo(r->reader);
	return 0;
}

static HANDLE open_host_pipe(PCWSTR path, DWORD *err)
{
	int i;

	for (i = 0; i < 3; i++) {
		HANDLE h = CreateFileW(path, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);

		if (h != INVALID_HANDLE_VALUE) {
			*err = 0;
			return h;
		}
		*err = GetLastError();
		if (*err != ERROR_PIPE_BUSY || !WaitNamedPipeW(path, PIPE_BUSY_WAIT_MS))
			break;
	}
	return INVALID_HANDLE_VALUE;
}

/* pipe_connect opens the host pipe, attaches it and relays it until both directions end. */
static DWORD WINAPI pipe_connect(void *arg)
{
	struct pipe_relay *r = arg;
	struct buf f = {0};
	char num[32];
	DWORD err = 0;
	WCHAR *path = wide_of(r->host, 0);
	HANDLE writer;

	r->h = path == NULL ? INVALID_HANDLE_VALUE : open_host_pipe(path, &err);
	if (path == NULL)
		err = ERROR_OUTOFMEMORY;
	free(path);
	r->s = emu_dial();
	if (r->s == INVALID_SOCKET) {
		pipe_relay_free(r);
		return 0;
	}
	snprintf(num, sizeof(num), "%lu", (unsigned long)err);
	if (!(buf_adds(&f, "{\"id\":1,\"method\":\"AttachPipe\",\"args\":{\"token\":") && buf_add_string(&f, r->token) &&
	      buf_adds(&f, ",\"error\":") && buf_adds(&f, num) && buf_adds(&f, "}}")) ||
	    !send_frame(r->s, f.data, f.len) || err != 0) {
		buf_free(&f);
		pipe_relay_free(r);
		return 0;
	}
	buf_free(&f);
	r->reader_done = CreateEventW(NULL, TRUE, FALSE, NULL);
	r->reader = r->reader_done == NULL ? NULL : CreateThread(NULL, 0, pipe_to_socket, r, 0, NULL);
	if (r->reader == NULL) {
		pipe_relay_free(r);
		return 0;
	}
	writer = CreateThread(NULL, 0, socket_to_pipe, r, 0, NULL);
	if (writer == NULL) {
		/* Nothing reaches the pipe: end as if the container had closed its side. */
		InterlockedExchange(&r->container_closed, 1);
		shutdown(r->s, SD_BOTH);
		while (WaitForSingleObject(r->reader_done, 10) != WAIT_OBJECT_0)
			CancelSynchronousIo(r->reader);
	} else {
		WaitForSingleObject(writer, INFINITE);
		CloseHandle(writer);
	}
	WaitForSingleObject(r->reader, INFINITE);
	pipe_relay_free(r);
	return 0;
}

/* on_pipe_event starts the relay of a mapped pipe (the event is the DLL's, no caller's). */
static void on_pipe_event(struct jv pipe)
{
	struct jv v;
	struct pipe_relay *r = calloc(1, sizeof(*r));
	HANDLE t;

	if (r == NULL)
		return;
	r->s = INVALID_SOCKET;
	if (json_find(pipe, "hostPath", &v))
		r->host = json_string(v);
	if (json_find(pipe, "token", &v))
		r->token = json_string(v);
	if (r->host == NULL || r->token == NULL) {
		pipe_relay_free(r);
		return;
	}
	/* Opening the pipe may wait for its server: not on the reader thread. */
	t = CreateThread(NULL, 0, pipe_connect, r, 0, NULL);
	if (t == NULL) {
		pipe_relay_free(r);
		return;
	}
	CloseHandle(t);
}

/* ---- responses and events ---- */

static struct request *take_request(unsigned long long id)
{
	struct request **pp;

	for (pp = &pending; *pp != NULL; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct request *r = *pp;

			*pp = r->next;
			return r;
		}
	}
	return NULL;
}

static void mark_system_exited(struct sys *s, const char *doc)
{
	if (s->exited)
		return;
	s->exited = 1;
	s->exit_doc = dup_str(doc);
	SetEvent(s->exited_ev);
	if (!s->closed)
		queue_event(s->cb, s->ctx, EVENT_SYSTEM_EXITED, doc);
}

static void mark_process_exited(struct proc *p, const char *doc)
{
	if (p->exited)
		return;
	p->exited = 1;
	p->exit_doc = dup_str(doc);
	SetEvent(p->exited_ev);
	if (!p->closed)
		queue_event(p->cb, p->ctx, EVENT_PROCESS_EXITED, doc);
}

/* on_reply applies a response's reply to the handle it concerns (under mu). Stdio is attached
 * outside the lock by the caller, from the token this returns. */
static char *on_reply(struct request *r, struct jv reply)
{
	struct jv v;
	char *doc = NULL, *token = NULL;

	if (r->kind == R_SYSTEM && r->sys != NULL) {
		if (json_find(reply, "instance", &v))
			r->sys->instance = json_u64(v);
		if (json_find(reply, "stopped", &v) && json_bool(v)) {
			if (json_find(reply, "exitStatus", &v))
				doc = json_string(v);
			mark_system_exited(r->sys, doc);
		}
	} else if (r->kind == R_PROCESS && r->proc != NULL) {
		if (json_find(reply, "pid", &v))
			r->proc->pid = (DWORD)json_u64(v);
		r->info.ProcessId = r->proc->pid;
		if (json_find(reply, "exited", &v) && json_bool(v)) {
			if (json_find(reply, "exitStatus", &v))
				doc = json_string(v);
			mark_process_exited(r->proc, doc);
		}
		if (json_find(reply, "stdioToken", &v))
			token = json_string(v);
	}
	free(doc);
	return token;
}

static void on_response(struct jv frame, unsigned long long id)
{
	struct jv v, reply, stdio, b;
	struct request *r;
	struct relay *in = NULL;
	char *token = NULL;
	int slots[3] = {0, 0, 0}, i;

	EnterCriticalSection(&mu);
	r = take_request(id);
	if (r == NULL) {
		LeaveCriticalSection(&mu);
		return;
	}
	r->hr = json_find(frame, "hresult", &v) ? (HRESULT)(DWORD)json_u64(v) : HR_OK;
	if (json_find(frame, "result", &v))
		r->result = json_string(v);
	if (SUCCEEDED(r->hr) && json_find(frame, "reply", &reply)) {
		token = on_reply(r, reply);
		if (json_find(reply, "stdio", &stdio))
			for (i = 0; i < 3; i++)
				slots[i] = json_index(stdio, i, &b) && json_bool(b);
	}
	LeaveCriticalSection(&mu);

	/* Connecting the streams takes round trips: not under the lock. */
	if (token != NULL) {
		HANDLE *h[3] = {&r->info.StdInput, &r->info.StdOutput, &r->info.StdError};

		for (i = 0; i < 3; i++)
			if (slots[i])
				*h[i] = attach_stdio(token, i, &in);
		free(token);
	}

	EnterCriticalSection(&mu);
	if (in != NULL) {
		if (r->proc != NULL && r->proc->stdin_relay == NULL)
			r->proc->stdin_relay = in;
		else
			relay_release(in);
	}
	if (r->op != NULL) {
		r->op->info = r->info;
		complete_op(r->op, r->hr, r->result);
		r->result = NULL;
		op_release(r->op);
		sys_release(r->sys);
		proc_release(r->proc);
		free(r);
	} else {
		SetEvent(r->done); /* the waiting caller frees it */
	}
	LeaveCriticalSection(&mu);
}

static void on_event(struct jv ev)
{
	struct jv v, sysref;
	DWORD type = 0, pid = 0;
	char *id = NULL, *data = NULL;
	unsigned long long instance = 0;
	struct sys *s;
	struct proc *p;

	if (json_find(ev, "pipe", &v)) {
		on_pipe_event(v);
		return;
	}
	if (json_find(ev, "type", &v))
		type = (DWORD)json_u64(v);
	if (json_find(ev, "pid", &v))
		pid = (DWORD)json_u64(v);
	if (json_find(ev, "data", &v))
		data = json_string(v);
	if (json_find(ev, "system", &sysref)) {
		if (json_find(sysref, "id", &v))
			id = json_string(v);
		if (json_find(sysref, "instance", &v))
			instance = json_u64(v);
	}
	if (id == NULL) {
		free(data);
		return;
	}
	EnterCriticalSection(&mu);
	if (type == EVENT_SYSTEM_EXITED) {
		for (s = systems; s != NULL; s = s->next)
			if (strcmp(s->id, id) == 0 && (instance == 0 || s->instance == 0 || s->instance == instance))
				mark_system_exited(s, data);
	} else if (type == EVENT_PROCESS_EXITED) {
		for (p = procs; p != NULL; p = p->next)
			if (p->pid == pid && strcmp(p->sys_id, id) == 0 &&
			    (instance == 0 || p->instance == 0 || p->instance == instance))
				mark_process_exited(p, data);
	}
	LeaveCriticalSection(&mu);
	free(id);
	free(data);
}

/* on_disconnect fails what is pending and tells every handle the service has gone. */
static void on_disconnect(void)
{
	struct request *r;
	struct sys *s;
	struct proc *p;

	EnterCriticalSection(&mu);
	disconnected = 1;
	while ((r = pending) != NULL) {
		pending = r->next;
		r->hr = HR_SERVICE_DISCONNECT;
		if (r->op != NULL) {
			complete_op(r->op, HR_SERVICE_DISCONNECT, NULL);
			op_release(r->op);
			sys_release(r->sys);
			proc_release(r->proc);
			free(r);
		} else {
			SetEvent(r->done);
		}
	}
	for (s = systems; s != NULL; s = s->next)
		queue_event(s->cb, s->ctx, EVENT_SERVICE_DISCONNECT, NULL);
	for (p = procs; p != NULL; p = p->next)
		queue_event(p->cb, p->ctx, EVENT_SERVICE_DISCONNECT, NULL);
	LeaveCriticalSection(&mu);
}

static DWORD WINAPI reader(void *arg)
{
	SOCKET s = (SOCKET)(ULONG_PTR)arg;

	for (;;) {
		size_t n;
		char *body = frame_read(s, &n);
		struct jv frame, v;

		if (body == NULL)
			break;
		frame.p = body;
		frame.end = body + n;
		if (json_find(frame, "event", &v))
			on_event(v);
		else if (json_find(frame, "id", &v))
			on_response(frame, json_u64(v));
		free(body);
	}
	on_disconnect();
	return 0;
}

static BOOL CALLBACK init(PINIT_ONCE once, void *param, void **ctx)
{
	WSADATA wsa;

	(void)once;
	(void)param;
	(void)ctx;
	InitializeCriticalSection(&mu);
	InitializeCriticalSection(&send_mu);
	InitializeConditionVariable(&work_cv);
	WSAStartup(MAKEWORD(2, 2), &wsa);
	return TRUE;
}

/* connected returns the daemon connection, dialling it the first time (under mu). */
static SOCKET connected(void)
{
	HANDLE t;

	if (sock != INVALID_SOCKET || disconnected)
		return disconnected ? INVALID_SOCKET : sock;
	sock = emu_dial_control();
	if (sock == INVALID_SOCKET)
		return INVALID_SOCKET;
	t = CreateThread(NULL, 0, reader, (void *)(ULONG_PTR)sock, 0, NULL);
	if (t == NULL) {
		closesocket(sock);
		sock = INVALID_SOCKET;
		return INVALID_SOCKET;
	}
	CloseHandle(t);
	return sock;
}

static void setup(void)
{
	InitOnceExecuteOnce(&init_once, init, NULL, NULL);
}

/*
 * call sends method(args) (args: a JSON object). With an operation it returns at once and the
 * operation completes when the response arrives; without one it waits for the response and
 * returns the request (the caller frees it with free_request). sys/proc: the handle the reply
 * fills (R_SYSTEM / R_PROCESS).
 */
static HRESULT call(const char *method, const char *args, struct op *o, int type, enum reply_kind kind,
		    struct sys *sys, struct proc *proc, struct request **sync)
{
	struct buf f = {0};
	struct request *r;
	char num[32];
	SOCKET s;

	setup();
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return HR_OUTOFMEMORY;
	EnterCriticalSection(&mu);
	if (o != NULL && o->state == OPS_PENDING) {
		LeaveCriticalSection(&mu);
		free(r);
		return HR_OPERATION_ALREADY_STARTED;
	}
	s = connected();
	if (s == INVALID_SOCKET) {
		LeaveCriticalSection(&mu);
		free(r);
		return disconnected ? HR_SERVICE_DISCONNECT : HR_SERVICE_NOT_AVAILABLE;
	}
	r->id = ++next_id;
	r->kind = kind;
	if (sys != NULL) {
		r->sys = sys;
		sys->refs++;
	}
	if (proc != NULL) {
		r->proc = proc;
		proc->refs++;
	}
	if (o != NULL) {
		r->op = o;
		o->refs++;
		o->state = OPS_PENDING;
		o->type = type;
		o->request = r->id;
		ResetEvent(o->done);
		if (sys != NULL && o->sys == NULL) {
			o->sys = sys;
			sys->refs++;
		}
		if (proc != NULL && o->proc == NULL) {
			o->proc = proc;
			proc->refs++;
		}
	} else {
		r->done = CreateEventW(NULL, TRUE, FALSE, NULL);
	}
	r->next = pending;
	pending = r;
	snprintf(num, sizeof(num), "%llu", r->id);
	LeaveCriticalSection(&mu);

	if (!(buf_adds(&f, "{\"id\":") && buf_adds(&f, num) && buf_adds(&f, ",\"method\":") &&
	      buf_add_string(&f, method) && buf_adds(&f, ",\"args\":") && buf_adds(&f, args) && buf_adds(&f, "}")) ||
	    !send_frame(s, f.data, f.len)) {
		/* The reader sees the broken connection too and fails the request; nothing more here. */
		buf_free(&f);
		if (sync != NULL) {
			WaitForSingleObject(r->done, INFINITE);
			*sync = r;
			return r->hr;
		}
		return HR_OK;
	}
	buf_free(&f);
	if (sync != NULL) {
		WaitForSingleObject(r->done, INFINITE);
		*sync = r;
		return r->hr;
	}
	return HR_OK;
}

static void free_request(struct request *r)
{
	if (r == NULL)
		return;
	EnterCriticalSection(&mu);
	sys_release(r->sys);
	proc_release(r->proc);
	LeaveCriticalSection(&mu);
	if (r->done != NULL)
		CloseHandle(r->done);
	free(r->result);
	free(r);
}

/* ---- argument documents ---- */

static int add_sysref(struct buf *b, const char *id, unsigned long long instance)
{
	char num[32];

	snprintf(num, sizeof(num), "%llu", instance);
	return buf_adds(b, "{\"id\":") && buf_add_string(b, id) && buf_adds(b, ",\"instance\":") && buf_adds(b, num) &&
	       buf_adds(b, "}");
}

/* add_doc appends the member "key":"<doc>" to the object being built when doc is not NULL. */
static int add_doc(struct buf *b, const char *key, PCWSTR doc)
{
	char *s;
	int ok;

	if (doc == NULL)
		return 1;
	s = utf8_of(doc);
	if (s == NULL)
		return 0;
	ok = (b->len > 0 && b->data[b->len - 1] == '{' ? 1 : buf_adds(b, ",")) && buf_adds(b, "\"") &&
	     buf_adds(b, key) && buf_adds(b, "\":") && buf_add_string(b, s);
	free(s);
	return ok;
}

static HRESULT system_call(const char *method, HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR doc, int type)
{
	struct sys *s = cs;
	struct buf a = {0};
	HRESULT hr;

	if (s == NULL || op == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	hr = buf_adds(&a, "{\"system\":") && add_sysref(&a, s->id, s->instance) ? HR_OK : HR_OUTOFMEMORY;
	LeaveCriticalSection(&mu);
	if (hr == HR_OK)
		hr = add_doc(&a, "document", doc) && buf_adds(&a, "}") ? HR_OK : HR_OUTOFMEMORY;
	if (hr == HR_OK)
		hr = call(method, a.data, op, type, R_PLAIN, s, NULL, NULL);
	buf_free(&a);
	return hr;
}

static HRESULT process_call(const char *method, HCS_PROCESS hp, HCS_OPERATION op, PCWSTR doc, int type)
{
	struct proc *p = hp;
	struct buf a = {0};
	char num[32];
	HRESULT hr;

	if (p == NULL || op == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	snprintf(num, sizeof(num), "%lu", (unsigned long)p->pid);
	hr = buf_adds(&a, "{\"process\":{\"system\":") && add_sysref(&a, p->sys_id, p->instance) &&
			     buf_adds(&a, ",\"pid\":") && buf_adds(&a, num) && buf_adds(&a, "}")
		     ? HR_OK
		     : HR_OUTOFMEMORY;
	LeaveCriticalSection(&mu);
	if (hr == HR_OK)
		hr = add_doc(&a, "document", doc) && buf_adds(&a, "}") ? HR_OK : HR_OUTOFMEMORY;
	if (hr == HR_OK)
		hr = call(method, a.data, op, type, R_PLAIN, NULL, p, NULL);
	buf_free(&a);
	return hr;
}

static struct sys *new_sys(const char *id)
{
	struct sys *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->refs = 1;
	s->id = dup_str(id);
	s->exited_ev = CreateEventW(NULL, TRUE, FALSE, NULL);
	EnterCriticalSection(&mu);
	s->next = systems;
	systems = s;
	LeaveCriticalSection(&mu);
	return s;
}

static struct proc *new_proc(struct sys *s)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->refs = 1;
	p->exited_ev = CreateEventW(NULL, TRUE, FALSE, NULL);
	EnterCriticalSection(&mu);
	p->sys_id = dup_str(s->id);
	p->instance = s->instance;
	p->next = procs;
	procs = p;
	LeaveCriticalSection(&mu);
	return p;
}

/* take_doc copies a document for the caller, who frees it with LocalFree. */
static PWSTR take_doc(const char *s)
{
	return s == NULL ? NULL : wide_of(s, 1);
}

EXPORT void WINAPI HcsCloseComputeSystem(HCS_SYSTEM cs);

/* ---- operations ---- */

EXPORT HCS_OPERATION WINAPI HcsCreateOperation(void *context, HCS_OPERATION_COMPLETION callback)
{
	struct op *o;

	setup();
	o = calloc(1, sizeof(*o));
	if (o == NULL)
		return NULL;
	o->refs = 1;
	o->ctx = context;
	o->cb = callback;
	o->type = OP_NONE;
	o->done = CreateEventW(NULL, TRUE, FALSE, NULL);
	return o;
}

EXPORT void WINAPI HcsCloseOperation(HCS_OPERATION op)
{
	struct op *o = op;

	if (o == NULL)
		return;
	setup();
	EnterCriticalSection(&mu);
	o->closed = 1;
	op_release(o);
	LeaveCriticalSection(&mu);
}

EXPORT void *WINAPI HcsGetOperationContext(HCS_OPERATION op)
{
	return op == NULL ? NULL : ((struct op *)op)->ctx;
}

EXPORT HRESULT WINAPI HcsSetOperationContext(HCS_OPERATION op, void *context)
{
	if (op == NULL)
		return HR_INVALIDARG;
	((struct op *)op)->ctx = context;
	return HR_OK;
}

EXPORT HCS_SYSTEM WINAPI HcsGetComputeSystemFromOperation(HCS_OPERATION op)
{
	return op == NULL ? NULL : ((struct op *)op)->sys;
}

EXPORT HCS_PROCESS WINAPI HcsGetProcessFromOperation(HCS_OPERATION op)
{
	return op == NULL ? NULL : ((struct op *)op)->proc;
}

EXPORT int WINAPI HcsGetOperationType(HCS_OPERATION op)
{
	return op == NULL ? OP_NONE : ((struct op *)op)->type;
}

EXPORT unsigned long long WINAPI HcsGetOperationId(HCS_OPERATION op)
{
	return op == NULL ? 0 : ((struct op *)op)->request;
}

/* result reads a completed operation's outcome (under mu). */
static HRESULT result(struct op *o, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
	if (doc != NULL)
		*doc = NULL;
	if (o->state == OPS_IDLE)
		return HR_OPERATION_NOT_STARTED;
	if (o->state == OPS_PENDING)
		return HR_OPERATION_PENDING;
	if (doc != NULL)
		*doc = take_doc(o->result);
	if (info != NULL) {
		/* The handles are the caller's now: hand them out once. */
		*info = o->info;
		o->info.StdInput = o->info.StdOutput = o->info.StdError = NULL;
	}
	return o->hr;
}

static HRESULT wait_result(HCS_OPERATION op, DWORD timeout, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
	struct op *o = op;
	HRESULT hr;

	if (o == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	if (o->state == OPS_IDLE) {
		LeaveCriticalSection(&mu);
		if (doc != NULL)
			*doc = NULL;
		return HR_OPERATION_NOT_STARTED;
	}
	LeaveCriticalSection(&mu);
	if (WaitForSingleObject(o->done, timeout) != WAIT_OBJECT_0) {
		if (doc != NULL)
			*doc = NULL;
		return HR_WAIT_TIMEOUT;
	}
	EnterCriticalSection(&mu);
	hr = result(o, info, doc);
	LeaveCriticalSection(&mu);
	return hr;
}

EXPORT HRESULT WINAPI HcsGetOperationResult(HCS_OPERATION op, PWSTR *doc)
{
	HRESULT hr;

	if (op == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	hr = result(op, NULL, doc);
	LeaveCriticalSection(&mu);
	return hr;
}

EXPORT HRESULT WINAPI HcsGetOperationResultAndProcessInfo(HCS_OPERATION op, HCS_PROCESS_INFORMATION *info,
							  PWSTR *doc)
{
	HRESULT hr;

	if (op == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	hr = result(op, info, doc);
	LeaveCriticalSection(&mu);
	return hr;
}

EXPORT HRESULT WINAPI HcsWaitForOperationResult(HCS_OPERATION op, DWORD timeout, PWSTR *doc)
{
	return wait_result(op, timeout, NULL, doc);
}

EXPORT HRESULT WINAPI HcsWaitForOperationResultAndProcessInfo(HCS_OPERATION op, DWORD timeout,
							      HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
	return wait_result(op, timeout, info, doc);
}

EXPORT HRESULT WINAPI HcsCancelOperation(HCS_OPERATION op)
{
	struct op *o = op;
	char args[64];
	unsigned long long id;
	struct request *r = NULL;
	HRESULT hr;

	if (o == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	if (o->state != OPS_PENDING) {
		LeaveCriticalSection(&mu);
		return HR_OK;
	}
	id = o->request;
	LeaveCriticalSection(&mu);
	snprintf(args, sizeof(args), "{\"request\":%llu}", id);
	hr = call("Cancel", args, NULL, OP_NONE, R_PLAIN, NULL, NULL, &r);
	free_request(r);
	return hr;
}

/* ---- compute systems ---- */

EXPORT HRESULT WINAPI HcsCreateComputeSystem(PCWSTR id, PCWSTR configuration, HCS_OPERATION op,
					     const void *security_descriptor, HCS_SYSTEM *cs)
{
	struct buf a = {0};
	char *uid;
	struct sys *s;
	HRESULT hr;

	(void)security_descriptor;
	if (id == NULL || configuration == NULL || op == NULL || cs == NULL)
		return HR_INVALIDARG;
	setup();
	uid = utf8_of(id);
	s = uid != NULL ? new_sys(uid) : NULL;
	if (s == NULL || !(buf_adds(&a, "{\"id\":") && buf_add_string(&a, uid) &&
			   add_doc(&a, "configuration", configuration) && buf_adds(&a, "}"))) {
		free(uid);
		buf_free(&a);
		return HR_OUTOFMEMORY;
	}
	free(uid);
	hr = call("CreateComputeSystem", a.data, op, OP_CREATE, R_SYSTEM, s, NULL, NULL);
	buf_free(&a);
	if (FAILED(hr)) {
		EnterCriticalSection(&mu);
		s->closed = 1;
		LeaveCriticalSection(&mu);
		HcsCloseComputeSystem(s);
		return hr;
	}
	*cs = s;
	return HR_OK;
}

EXPORT HRESULT WINAPI HcsOpenComputeSystem(PCWSTR id, DWORD access, HCS_SYSTEM *cs)
{
	struct buf a = {0};
	struct request *r = NULL;
	char *uid;
	struct sys *s;
	HRESULT hr;

	(void)access;
	if (id == NULL || cs == NULL)
		return HR_INVALIDARG;
	setup();
	uid = utf8_of(id);
	s = uid != NULL ? new_sys(uid) : NULL;
	if (s == NULL || !(buf_adds(&a, "{\"id\":") && buf_add_string(&a, uid) && buf_adds(&a, "}"))) {
		free(uid);
		buf_free(&a);
		return HR_OUTOFMEMORY;
	}
	free(uid);
	hr = call("OpenComputeSystem", a.data, NULL, OP_NONE, R_SYSTEM, s, NULL, &r);
	buf_free(&a);
	free_request(r);
	if (FAILED(hr)) {
		HcsCloseComputeSystem(s);
		return hr;
	}
	*cs = s;
	return HR_OK;
}

/* unlink_sys removes a handle from the event routing (under mu). */
static void unlink_sys(struct sys *s)
{
	struct sys **pp;

	for (pp = &systems; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			return;
		}
}

static void unlink_proc(struct proc *p)
{
	struct proc **pp;

	for (pp = &procs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

EXPORT void WINAPI HcsCloseComputeSystem(HCS_SYSTEM cs)
{
	struct sys *s = cs;
	struct buf a = {0};
	int tell;

	if (s == NULL)
		return;
	setup();
	EnterCriticalSection(&mu);
	tell = s->instance != 0 && !s->closed;
	s->closed = 1;
	if (tell && buf_adds(&a, "{\"system\":") && add_sysref(&a, s->id, s->instance) && buf_adds(&a, "}")) {
		LeaveCriticalSection(&mu);
		/* HcsCloseComputeSystem is synchronous: once it returns, the service has dropped the
		 * handle, and a stopped system whose last handle it was is gone (an open right after
		 * must not find it). So the daemon's answer is awaited (bounded: a daemon that goes
		 * fails every pending call). */
		struct op *o = HcsCreateOperation(NULL, NULL);

		if (o != NULL) {
			if (call("CloseComputeSystem", a.data, o, OP_NONE, R_PLAIN, NULL, NULL, NULL) == HR_OK)
				wait_result(o, CLOSE_WAIT_MS, NULL, NULL);
			HcsCloseOperation(o);
		}
		EnterCriticalSection(&mu);
	}
	buf_free(&a);
	unlink_sys(s);
	sys_release(s);
	LeaveCriticalSection(&mu);
}

EXPORT HRESULT WINAPI HcsEnumerateComputeSystems(PCWSTR query, HCS_OPERATION op)
{
	struct buf a = {0};
	HRESULT hr;

	if (op == NULL)
		return HR_INVALIDARG;
	setup();
	if (!(buf_adds(&a, "{") && add_doc(&a, "query", query) && buf_adds(&a, "}"))) {
		buf_free(&a);
		return HR_OUTOFMEMORY;
	}
	hr = call("EnumerateComputeSystems", a.data, op, OP_ENUMERATE, R_PLAIN, NULL, NULL, NULL);
	buf_free(&a);
	return hr;
}

EXPORT HRESULT WINAPI HcsStartComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR options)
{
	return system_call("StartComputeSystem", cs, op, options, OP_START);
}

EXPORT HRESULT WINAPI HcsShutDownComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR options)
{
	return system_call("ShutDownComputeSystem", cs, op, options, OP_SHUTDOWN);
}

EXPORT HRESULT WINAPI HcsTerminateComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR options)
{
	return system_call("TerminateComputeSystem", cs, op, options, OP_TERMINATE);
}

EXPORT HRESULT WINAPI HcsPauseComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR options)
{
	return system_call("PauseComputeSystem", cs, op, options, OP_PAUSE);
}

EXPORT HRESULT WINAPI HcsResumeComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR options)
{
	return system_call("ResumeComputeSystem", cs, op, options, OP_RESUME);
}

EXPORT HRESULT WINAPI HcsGetComputeSystemProperties(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR query)
{
	return system_call("GetComputeSystemProperties", cs, op, query, OP_GET_PROPERTIES);
}

EXPORT HRESULT WINAPI HcsModifyComputeSystem(HCS_SYSTEM cs, HCS_OPERATION op, PCWSTR configuration, HANDLE identity)
{
	(void)identity;
	return system_call("ModifyComputeSystem", cs, op, configuration, OP_MODIFY);
}

/* wait_exit waits for a handle's exit event and copies its exit document. */
static HRESULT wait_exit(HANDLE ev, char **docp, DWORD timeout, PWSTR *result)
{
	HRESULT hr = HR_OK;

	if (result != NULL)
		*result = NULL;
	if (WaitForSingleObject(ev, timeout) != WAIT_OBJECT_0)
		return HR_WAIT_TIMEOUT;
	EnterCriticalSection(&mu);
	if (result != NULL)
		*result = take_doc(*docp);
	LeaveCriticalSection(&mu);
	return hr;
}

EXPORT HRESULT WINAPI HcsWaitForComputeSystemExit(HCS_SYSTEM cs, DWORD timeout, PWSTR *result)
{
	struct sys *s = cs;

	if (s == NULL)
		return HR_INVALIDARG;
	setup();
	return wait_exit(s->exited_ev, &s->exit_doc, timeout, result);
}

EXPORT HRESULT WINAPI HcsSetComputeSystemCallback(HCS_SYSTEM cs, DWORD options, void *context,
						  HCS_EVENT_CALLBACK callback)
{
	struct sys *s = cs;

	(void)options;
	if (s == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	s->cb = callback;
	s->ctx = context;
	/* An exit that came before the callback is delivered now, so no caller waits forever. */
	if (s->exited)
		queue_event(s->cb, s->ctx, EVENT_SYSTEM_EXITED, s->exit_doc);
	if (disconnected)
		queue_event(s->cb, s->ctx, EVENT_SERVICE_DISCONNECT, NULL);
	LeaveCriticalSection(&mu);
	return HR_OK;
}

/* ---- processes ---- */

EXPORT HRESULT WINAPI HcsCreateProcess(HCS_SYSTEM cs, PCWSTR parameters, HCS_OPERATION op,
				       const void *security_descriptor, HCS_PROCESS *process)
{
	struct sys *s = cs;
	struct proc *p;
	struct buf a = {0};
	HRESULT hr;

	(void)security_descriptor;
	if (s == NULL || parameters == NULL || op == NULL || process == NULL)
		return HR_INVALIDARG;
	setup();
	p = new_proc(s);
	if (p == NULL)
		return HR_OUTOFMEMORY;
	EnterCriticalSection(&mu);
	hr = buf_adds(&a, "{\"system\":") && add_sysref(&a, s->id, s->instance) ? HR_OK : HR_OUTOFMEMORY;
	LeaveCriticalSection(&mu);
	if (hr == HR_OK)
		hr = add_doc(&a, "parameters", parameters) && buf_adds(&a, "}") ? HR_OK : HR_OUTOFMEMORY;
	if (hr == HR_OK)
		hr = call("CreateProcess", a.data, op, OP_CREATE_PROCESS, R_PROCESS, NULL, p, NULL);
	buf_free(&a);
	if (FAILED(hr)) {
		EnterCriticalSection(&mu);
		p->closed = 1;
		unlink_proc(p);
		proc_release(p);
		LeaveCriticalSection(&mu);
		return hr;
	}
	*process = p;
	return HR_OK;
}

EXPORT HRESULT WINAPI HcsOpenProcess(HCS_SYSTEM cs, DWORD pid, DWORD access, HCS_PROCESS *process)
{
	struct sys *s = cs;
	struct proc *p;
	struct buf a = {0};
	struct request *r = NULL;
	char num[32];
	HRESULT hr;

	(void)access;
	if (s == NULL || process == NULL)
		return HR_INVALIDARG;
	setup();
	p = new_proc(s);
	if (p == NULL)
		return HR_OUTOFMEMORY;
	snprintf(num, sizeof(num), "%lu", (unsigned long)pid);
	EnterCriticalSection(&mu);
	p->pid = pid;
	/* OpenProcess's args are a bare wire.ProcessRef, unlike the other process methods'. */
	hr = buf_adds(&a, "{\"system\":") && add_sysref(&a, s->id, s->instance) && buf_adds(&a, ",\"pid\":") &&
			     buf_adds(&a, num) && buf_adds(&a, "}")
		     ? HR_OK
		     : HR_OUTOFMEMORY;
	LeaveCriticalSection(&mu);
	if (hr == HR_OK)
		hr = call("OpenProcess", a.data, NULL, OP_NONE, R_PROCESS, NULL, p, &r);
	buf_free(&a);
	/* HCS's HcsOpenProcess gives no stdio; any the daemon attached are closed here. */
	if (r != NULL) {
		if (r->info.StdInput != NULL)
			CloseHandle(r->info.StdInput);
		if (r->info.StdOutput != NULL)
			CloseHandle(r->info.StdOutput);
		if (r->info.StdError != NULL)
			CloseHandle(r->info.StdError);
	}
	free_request(r);
	if (FAILED(hr)) {
		EnterCriticalSection(&mu);
		p->closed = 1;
		unlink_proc(p);
		proc_release(p);
		LeaveCriticalSection(&mu);
		return hr;
	}
	*process = p;
	return HR_OK;
}

EXPORT void WINAPI HcsCloseProcess(HCS_PROCESS hp)
{
	struct proc *p = hp;
	struct buf a = {0};
	char num[32];
	int tell;

	if (p == NULL)
		return;
	setup();
	EnterCriticalSection(&mu);
	tell = p->pid != 0 && !p->closed;
	p->closed = 1;
	snprintf(num, sizeof(num), "%lu", (unsigned long)p->pid);
	if (tell && buf_adds(&a, "{\"process\":{\"system\":") && add_sysref(&a, p->sys_id, p->instance) &&
	    buf_adds(&a, ",\"pid\":") && buf_adds(&a, num) && buf_adds(&a, "}}")) {
		LeaveCriticalSection(&mu);
		struct op *o = HcsCreateOperation(NULL, NULL);

		if (o != NULL) {
			/* Synchronous, as HcsCloseComputeSystem (above). */
			if (call("CloseProcess", a.data, o, OP_NONE, R_PLAIN, NULL, NULL, NULL) == HR_OK)
				wait_result(o, CLOSE_WAIT_MS, NULL, NULL);
			HcsCloseOperation(o);
		}
		EnterCriticalSection(&mu);
	}
	buf_free(&a);
	unlink_proc(p);
	proc_release(p);
	LeaveCriticalSection(&mu);
}

EXPORT HRESULT WINAPI HcsTerminateProcess(HCS_PROCESS p, HCS_OPERATION op, PCWSTR options)
{
	return process_call("TerminateProcess", p, op, options, OP_TERMINATE);
}

EXPORT HRESULT WINAPI HcsSignalProcess(HCS_PROCESS p, HCS_OPERATION op, PCWSTR options)
{
	return process_call("SignalProcess", p, op, options, OP_SIGNAL_PROCESS);
}

/* HcsGetProcessInfo completes at once with what this DLL knows: the pid (HCS gives the std
 * handles only to the creator, through the create operation). */
EXPORT HRESULT WINAPI HcsGetProcessInfo(HCS_PROCESS hp, HCS_OPERATION op)
{
	struct proc *p = hp;
	struct op *o = op;

	if (p == NULL || o == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	if (o->state == OPS_PENDING) {
		LeaveCriticalSection(&mu);
		return HR_OPERATION_ALREADY_STARTED;
	}
	o->type = OP_GET_PROCESS_INFO;
	memset(&o->info, 0, sizeof(o->info));
	o->info.ProcessId = p->pid;
	if (o->proc == NULL) {
		o->proc = p;
		p->refs++;
	}
	complete_op(o, HR_OK, NULL);
	LeaveCriticalSection(&mu);
	return HR_OK;
}

EXPORT HRESULT WINAPI HcsGetProcessProperties(HCS_PROCESS p, HCS_OPERATION op, PCWSTR query)
{
	return process_call("GetProcessProperties", p, op, query, OP_GET_PROCESS_PROPERTIES);
}

EXPORT HRESULT WINAPI HcsModifyProcess(HCS_PROCESS p, HCS_OPERATION op, PCWSTR settings)
{
	struct proc *pr = p;
	struct relay *in = NULL;

	if (pr != NULL && op != NULL && is_close_stdin(settings)) {
		setup();
		EnterCriticalSection(&mu);
		in = pr->stdin_relay;
		pr->stdin_relay = NULL;
		LeaveCriticalSection(&mu);
		if (in != NULL) {
			relay_finish(in);
			relay_release(in);
		}
	}
	return process_call("ModifyProcess", p, op, settings, OP_MODIFY_PROCESS);
}

EXPORT HRESULT WINAPI HcsWaitForProcessExit(HCS_PROCESS hp, DWORD timeout, PWSTR *result)
{
	struct proc *p = hp;

	if (p == NULL)
		return HR_INVALIDARG;
	setup();
	return wait_exit(p->exited_ev, &p->exit_doc, timeout, result);
}

EXPORT HRESULT WINAPI HcsSetProcessCallback(HCS_PROCESS hp, DWORD options, void *context, HCS_EVENT_CALLBACK callback)
{
	struct proc *p = hp;

	(void)options;
	if (p == NULL)
		return HR_INVALIDARG;
	setup();
	EnterCriticalSection(&mu);
	p->cb = callback;
	p->ctx = context;
	if (p->exited)
		queue_event(p->cb, p->ctx, EVENT_PROCESS_EXITED, p->exit_doc);
	if (disconnected)
		queue_event(p->cb, p->ctx, EVENT_SERVICE_DISCONNECT, NULL);
	LeaveCriticalSection(&mu);
	return HR_OK;
}

/* ---- the service ---- */

EXPORT HRESULT WINAPI HcsGetServiceProperties(PCWSTR query, PWSTR *result)
{
	struct buf a = {0};
	struct request *r = NULL;
	HRESULT hr;

	if (result != NULL)
		*result = NULL;
	setup();
	if (!(buf_adds(&a, "{") && add_doc(&a, "query", query) && buf_adds(&a, "}"))) {
		buf_free(&a);
		return HR_OUTOFMEMORY;
	}
	hr = call("GetServiceProperties", a.data, NULL, OP_NONE, R_PLAIN, NULL, NULL, &r);
	buf_free(&a);
	if (r != NULL && result != NULL)
		*result = take_doc(r->result);
	free_request(r);
	return hr;
}

/* HcsModifyServiceSettings(settings, result): settings is a ModificationRequest (Container
 * Credential Guard instances are what hcsemu emulates); result, on failure, receives the
 * ResultError document, as Microsoft's reference describes. */
EXPORT HRESULT WINAPI HcsModifyServiceSettings(PCWSTR settings, PWSTR *result)
{
	struct buf a = {0};
	struct request *r = NULL;
	HRESULT hr;

	if (result != NULL)
		*result = NULL;
	if (settings == NULL)
		return HR_INVALIDARG;
	setup();
	if (!(buf_adds(&a, "{") && add_doc(&a, "settings", settings) && buf_adds(&a, "}"))) {
		buf_free(&a);
		return HR_OUTOFMEMORY;
	}
	hr = call("ModifyServiceSettings", a.data, NULL, OP_NONE, R_PLAIN, NULL, NULL, &r);
	buf_free(&a);
	if (r != NULL && result != NULL)
		*result = take_doc(r->result);
	free_request(r);
	return hr;
}
