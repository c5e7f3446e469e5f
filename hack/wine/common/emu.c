/*
 * emu.c: the hcsemu client code the stand-in DLLs share; see emu.h.
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

/* ---- strings ---- */

char *utf8_of(PCWSTR w)
{
	int n;
	char *s;

	if (w == NULL)
		return NULL;
	n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
	s = malloc(n > 0 ? (size_t)n : 1);
	if (s == NULL)
		return NULL;
	if (n <= 0)
		s[0] = 0;
	else
		WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
	return s;
}

WCHAR *wide_of(const char *s, int local)
{
	int n;
	WCHAR *w;

	if (s == NULL)
		return NULL;
	n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
	if (n <= 0)
		return NULL;
	w = local ? LocalAlloc(LMEM_FIXED, (SIZE_T)n * sizeof(WCHAR)) : malloc((size_t)n * sizeof(WCHAR));
	if (w != NULL)
		MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
	return w;
}

char *dup_str(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = malloc(strlen(s) + 1);
	if (d != NULL)
		strcpy(d, s);
	return d;
}

/* ---- frames ---- */

int send_all(SOCKET s, const char *p, int n)
{
	while (n > 0) {
		int k = send(s, p, n, 0);

		if (k <= 0)
			return 0;
		p += k;
		n -= k;
	}
	return 1;
}

int recv_all(SOCKET s, char *p, int n)
{
	while (n > 0) {
		int k = recv(s, p, n, 0);

		if (k <= 0)
			return 0;
		p += k;
		n -= k;
	}
	return 1;
}

int frame_write(SOCKET s, const char *json, size_t n)
{
	unsigned char hdr[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
				(unsigned char)n};

	if (n > EMU_MAX_FRAME)
		return 0;
	return send_all(s, (const char *)hdr, 4) && send_all(s, json, (int)n);
}

char *frame_read(SOCKET s, size_t *np)
{
	unsigned char hdr[4];
	unsigned long n;
	char *body;

	if (!recv_all(s, (char *)hdr, 4))
		return NULL;
	n = (unsigned long)hdr[0] << 24 | (unsigned long)hdr[1] << 16 | (unsigned long)hdr[2] << 8 | hdr[3];
	if (n > EMU_MAX_FRAME)
		return NULL;
	body = malloc(n + 1);
	if (body == NULL || !recv_all(s, body, (int)n)) {
		free(body);
		return NULL;
	}
	body[n] = 0;
	*np = n;
	return body;
}

/* ---- dialling and the key ---- */

/* complain tells the program's stderr, once per process, why the stand-in cannot reach hcsemu:
 * the calls themselves can only fail with an HRESULT, which does not say that the key is
 * missing or refused. */
static void complain(const char *why)
{
	static LONG said;

	if (InterlockedExchange(&said, 1) == 0)
		fprintf(stderr, "hcsemu stand-in DLL: %s\n", why);
}

/*
 * read_key reads the daemon's key from the file $HCSEMU_TCP_KEY_FILE names (hcsemu
 * --tcp-key-file) into key (NUL-terminated, without surrounding white space); 0 if there is
 * none. A Linux path (starting with /) is reached through Wine's wine_get_dos_file_name, so
 * the variable can name the file as hcsemu wrote it; a Windows path (Z:\...) is used as is.
 */
static int read_key(char *key, size_t size)
{
	typedef WCHAR *(CDECL * dos_name_fn)(const char *);
	WCHAR path[MAX_PATH + 1], *name = path, *dos = NULL;
	DWORD n = GetEnvironmentVariableW(L"HCSEMU_TCP_KEY_FILE", path, MAX_PATH + 1);
	HANDLE f;
	char *p;
	size_t len;

	if (n == 0 || n > MAX_PATH) {
		complain("HCSEMU_TCP_KEY_FILE is not set: hcsemu serves no TCP client that does not present the key "
			 "in its --tcp-key-file");
		return 0;
	}
	if (path[0] == L'/') {
		dos_name_fn dos_name = (dos_name_fn)(void (*)(void))GetProcAddress(GetModuleHandleW(L"kernel32.dll"),
										 "wine_get_dos_file_name");
		char *unix_path = utf8_of(path);

		dos = dos_name != NULL && unix_path != NULL ? dos_name(unix_path) : NULL;
		free(unix_path);
		if (dos != NULL)
			name = dos;
	}
	f = CreateFileW(name, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, OPEN_EXISTING, 0, NULL);
	if (dos != NULL)
		HeapFree(GetProcessHeap(), 0, dos);
	if (f == INVALID_HANDLE_VALUE) {
		complain("cannot open the key file HCSEMU_TCP_KEY_FILE names");
		return 0;
	}
	if (!ReadFile(f, key, (DWORD)size - 1, &n, NULL))
		n = 0;
	CloseHandle(f);
	key[n] = 0;
	for (len = n; len > 0 && (unsigned char)key[len - 1] <= ' '; len--)
		key[len - 1] = 0;
	for (p = key; *p != 0 && (unsigned char)*p <= ' '; p++)
		;
	memmove(key, p, strlen(p) + 1);
	if (key[0] == 0) {
		complain("the key file HCSEMU_TCP_KEY_FILE names is empty");
		return 0;
	}
	return 1;
}

/*
 * authenticate is the first exchange on every connection (internal/hcsemu/wire's
 * MethodAuthenticate): {"id":1,"method":"Authenticate","args":{"key":K}}, answered {"id":1}
 * when K is the daemon's key; a wrong one gets the connection closed. 1 when admitted.
 */
static int authenticate(SOCKET s)
{
	char key[256];
	struct buf f = {0};
	struct jv frame, v;
	char *body;
	size_t n;
	DWORD timeout = 10000; /* ms: the daemon answers at once, or closes */
	int ok;

	if (!read_key(key, sizeof(key)))
		return 0;
	ok = buf_adds(&f, "{\"id\":1,\"method\":\"Authenticate\",\"args\":{\"key\":") && buf_add_string(&f, key) &&
	     buf_adds(&f, "}}");
	SecureZeroMemory(key, sizeof(key));
	ok = ok && frame_write(s, f.data, f.len);
	if (f.data != NULL)
		SecureZeroMemory(f.data, f.len);
	buf_free(&f);
	if (!ok)
		return 0;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, (const char *)&timeout, sizeof(timeout));
	body = frame_read(s, &n);
	timeout = 0;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, (const char *)&timeout, sizeof(timeout));
	if (body == NULL) {
		complain("hcsemu refused the key in HCSEMU_TCP_KEY_FILE (it is another daemon's, or stale)");
		return 0;
	}
	frame.p = body;
	frame.end = body + n;
	ok = json_find(frame, "id", &v) && json_u64(v) == 1 && !json_find(frame, "hresult", &v) &&
	     !json_find(frame, "event", &v);
	free(body);
	return ok;
}

SOCKET emu_dial(void)
{
	char addr[256], *colon;
	struct addrinfo hints, *res = NULL, *ai;
	SOCKET s = INVALID_SOCKET;
	DWORD n = GetEnvironmentVariableA("HCSEMU_TCP_ADDRESS", addr, sizeof(addr));

	if (n == 0 || n >= sizeof(addr))
		return INVALID_SOCKET;
	colon = strrchr(addr, ':');
	if (colon == NULL)
		return INVALID_SOCKET;
	*colon = 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(addr, colon + 1, &hints, &res) != 0)
		return INVALID_SOCKET;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (s == INVALID_SOCKET)
			continue;
		if (connect(s, ai->ai_addr, (int)ai->ai_addrlen) == 0)
			break;
		closesocket(s);
		s = INVALID_SOCKET;
	}
	freeaddrinfo(res);
	if (s != INVALID_SOCKET) {
		BOOL one = TRUE;

		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *)&one, sizeof(one));
		if (!authenticate(s)) {
			closesocket(s);
			s = INVALID_SOCKET;
		}
	}
	return s;
}

/* ---- Wine's paths ---- */

typedef char *(CDECL *unix_name_fn)(LPCWSTR);

char *emu_unix_path(PCWSTR dos)
{
	static unix_name_fn fn;
	char *u, *out;

	if (fn == NULL)
		fn = (unix_name_fn)(void *)GetProcAddress(GetModuleHandleA("kernel32.dll"), "wine_get_unix_file_name");
	if (fn == NULL || dos == NULL)
		return NULL;
	u = fn(dos);
	if (u == NULL)
		return NULL;
	out = dup_str(u);
	HeapFree(GetProcessHeap(), 0, u);
	return out;
}

char *emu_dos_devices(void)
{
	char *u = emu_unix_path(L"C:\\"), *p;

	if (u == NULL)
		return NULL;
	p = strstr(u, "/dosdevices/");
	if (p == NULL) {
		free(u);
		return NULL;
	}
	p[strlen("/dosdevices")] = 0;
	return u;
}

/*
 * client_paths sends wire.MethodClientPaths on a new control connection: this prefix's
 * dosdevices folder and its drives' volume names, through which hcsemu resolves the Windows
 * host paths (Z:\tmp\..., \\?\Volume{GUID}\...) of this connection's HCS documents as Wine
 * does. An emulator contract only: on Windows HCS opens the paths it is given.
 * {"id":1,"method":"ClientPaths","args":{"dosDevices":D,"volumes":{V:"c",…}}}, answered {"id":1} (an error response, as from a daemon that predates the method, leaves the
 * connection as it was: Windows host paths are then refused naming the field). 0 when the
 * connection broke.
 */
static int client_paths(SOCKET s)
{
	struct buf f = {0};
	char *dd = emu_dos_devices(), *body;
	size_t n;
	DWORD drives;
	int ok, i, first = 1;

	if (dd == NULL)
		return 1; /* not under Wine: no mapping to give */
	ok = buf_adds(&f, "{\"id\":1,\"method\":\"ClientPaths\",\"args\":{\"dosDevices\":") &&
	     buf_add_string(&f, dd) && buf_adds(&f, ",\"volumes\":{");
	free(dd);
	/* Each drive's volume name: containerd's CRI plugin resolves a mount's host path with
	 * GetFinalPathNameByHandle, which names it on its volume (\\?\Volume{GUID}\rest). */
	drives = GetLogicalDrives();
	for (i = 0; ok && i < 26; i++) {
		WCHAR root[4] = {(WCHAR)(L'A' + i), L':', L'\\', 0}, vol[MAX_PATH];
		char letter[2] = {(char)('a' + i), 0}, *v;

		if (!(drives & (1u << i)) || !GetVolumeNameForVolumeMountPointW(root, vol, MAX_PATH))
			continue;
		v = utf8_of(vol);
		ok = v != NULL && (first || buf_adds(&f, ",")) && buf_add_string(&f, v) && buf_adds(&f, ":") &&
		     buf_add_string(&f, letter);
		free(v);
		first = 0;
	}
	ok = ok && buf_adds(&f, "}}}");
	ok = ok && frame_write(s, f.data, f.len);
	buf_free(&f);
	if (!ok)
		return 0;
	body = frame_read(s, &n);
	if (body == NULL)
		return 0;
	free(body);
	return 1;
}

SOCKET emu_dial_control(void)
{
	SOCKET s = emu_dial();

	if (s != INVALID_SOCKET && !client_paths(s)) {
		closesocket(s);
		s = INVALID_SOCKET;
	}
	return s;
}

/* ---- the blocking connection ---- */

static INIT_ONCE call_once = INIT_ONCE_STATIC_INIT;
static CRITICAL_SECTION call_mu; /* guards the three below, held across a whole call */
static SOCKET call_sock = INVALID_SOCKET;
static int call_gone;
static unsigned long long call_id;

static BOOL CALLBACK call_init(PINIT_ONCE once, void *param, void **ctx)
{
	WSADATA wsa;

	(void)once;
	(void)param;
	(void)ctx;
	InitializeCriticalSection(&call_mu);
	WSAStartup(MAKEWORD(2, 2), &wsa);
	return TRUE;
}

/* call_drop ends the connection for good (under call_mu). */
static void call_drop(void)
{
	if (call_sock != INVALID_SOCKET)
		closesocket(call_sock);
	call_sock = INVALID_SOCKET;
	call_gone = 1;
}

HRESULT emu_call_doc(const char *method, const char *args, char **reply, char **result)
{
	struct buf f = {0};
	char num[32];
	unsigned long long id;
	HRESULT hr = EMU_HR_PROTOCOL_ERROR;

	if (reply != NULL)
		*reply = NULL;
	if (result != NULL)
		*result = NULL;
	InitOnceExecuteOnce(&call_once, call_init, NULL, NULL);
	EnterCriticalSection(&call_mu);
	if (call_gone) {
		LeaveCriticalSection(&call_mu);
		return EMU_HR_SERVICE_DISCONNECT;
	}
	if (call_sock == INVALID_SOCKET) {
		call_sock = emu_dial_control();
		if (call_sock == INVALID_SOCKET) {
			LeaveCriticalSection(&call_mu);
			return EMU_HR_SERVICE_NOT_AVAILABLE;
		}
	}
	id = ++call_id;
	snprintf(num, sizeof(num), "%llu", id);
	if (!buf_adds(&f, "{\"id\":") || !buf_adds(&f, num) || !buf_adds(&f, ",\"method\":") ||
	    !buf_add_string(&f, method) || !buf_adds(&f, ",\"args\":") || !buf_adds(&f, args) || !buf_adds(&f, "}")) {
		buf_free(&f);
		LeaveCriticalSection(&call_mu);
		return EMU_HR_OUTOFMEMORY;
	}
	if (!frame_write(call_sock, f.data, f.len)) {
		buf_free(&f);
		call_drop();
		LeaveCriticalSection(&call_mu);
		return EMU_HR_SERVICE_DISCONNECT;
	}
	buf_free(&f);
	for (;;) {
		size_t n;
		char *body = frame_read(call_sock, &n);
		struct jv frame, v;

		if (body == NULL) {
			call_drop();
			hr = EMU_HR_SERVICE_DISCONNECT;
			break;
		}
		frame.p = body;
		frame.end = body + n;
		/* Events do not concern this connection's calls; responses come in order. */
		if (json_find(frame, "event", &v) || !json_find(frame, "id", &v) || json_u64(v) != id) {
			free(body);
			continue;
		}
		hr = json_find(frame, "hresult", &v) ? (HRESULT)(unsigned long)json_u64(v) : 0;
		if (reply != NULL && json_find(frame, "reply", &v)) {
			*reply = malloc((size_t)(v.end - v.p) + 1);
			if (*reply == NULL) {
				hr = EMU_HR_OUTOFMEMORY;
			} else {
				memcpy(*reply, v.p, (size_t)(v.end - v.p));
				(*reply)[v.end - v.p] = 0;
			}
		}
		if (result != NULL && json_find(frame, "result", &v) && (*result = json_string(v)) == NULL)
			hr = EMU_HR_OUTOFMEMORY;
		free(body);
		break;
	}
	LeaveCriticalSection(&call_mu);
	return hr;
}

HRESULT emu_call(const char *method, const char *args, char **reply)
{
	return emu_call_doc(method, args, reply, NULL);
}
