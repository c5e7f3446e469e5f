/*
 * winesock.c: AF_UNIX stream sockets for Go programs under Wine 8. Installed by
 * winecompat_install (winecompat.c) under Wine only, in place of ws2_32's and mswsock's exports.
 *
 * What Windows does: since Windows 10 1803 Winsock has AF_UNIX (1) stream sockets
 * (afunix.h, SOCKADDR_UN: an ADDRESS_FAMILY and a 108-byte sun_path; learn.microsoft.com,
 * "AF_UNIX comes to Windows", devblogs.microsoft.com/commandline). bind makes a file at the
 * path (a reparse point) and fails if a file is there; connect reaches the socket listening at
 * the path; closing the listener leaves the file, which the program deletes (Go's
 * UnixListener.Close does). getsockname gives the bound path, getpeername the peer's, an
 * accepted socket's peer is unnamed (sun_path empty). Only SOCK_STREAM exists.
 *
 * What Wine 8 does: WSASocketW(AF_UNIX, …) fails with WSAEAFNOSUPPORT (10047): observed with
 * Debian 12's Wine 8.0, where kubelet.exe v1.37.2 exits at start because its device plugin
 * manager listens on C:\var\lib\kubelet\device-plugins\kubelet.sock. (Wine gained AF_UNIX
 * later, in the 9.x series; Debian 12 has 8.0.)
 *
 * The fix: an AF_UNIX stream socket is a TCP socket on 127.0.0.1, with the path as its name.
 * bind binds 127.0.0.1:0 and creates the file at the path (CREATE_NEW, so an existing file
 * fails with WSAEADDRINUSE, as on Windows) holding "runhcs-wine-afunix PORT"; connect reads the
 * port from the file (a missing file, or one that is not such a socket, fails with
 * WSAECONNREFUSED: an assumption, POSIX's ECONNREFUSED for a socket nobody listens on; Linux
 * says ENOENT for a missing path) and connects to it. getsockname and getpeername give the
 * paths; mswsock's GetAcceptExSockaddrs (Go's accept) gives the listener's path and an unnamed
 * peer for a connection accepted on such a listener. Reads, writes, overlapped I/O, AcceptEx and
 * close are the TCP socket's own, so Go's I/O completion port machinery works unchanged. Only
 * what programs look up with GetProcAddress (Go does, for every Winsock call) is replaced;
 * callers bound at load time keep Wine's. Abstract names (sun_path starting with NUL), which
 * Windows does not support either, fail with WSAEINVAL; SOCK_DGRAM is left to Wine (which
 * refuses it, as Windows does).
 *
 * Not the same as Windows, and acceptable for a test machine only: the socket is reachable by
 * anyone who can reach 127.0.0.1 in the network namespace, not only by those the file's ACL
 * admits. Tested in internal/wintest, TestAFUnix.
 *
 * SIO_UDP_NETRESET. Windows (8 and later; learn.microsoft.com, "SIO_UDP_NETRESET control code")
 * accepts WSAIoctl(SIO_UDP_NETRESET) on a UDP socket: a FALSE input turns off the reporting of
 * WSAENETRESET (an ICMP "TTL expired") by later receives. Go (>= 1.23, net/fd_windows.go
 * netFD.init) sets it on every UDP socket it makes and fails the socket if the call fails. Wine
 * 8 answers WSAEOPNOTSUPP (10045), so no Go program could open a UDP socket (observed:
 * net.ListenPacket("udp", "127.0.0.1:0") failed with "wsaioctl: winapi error #10045"). For a
 * UDP socket whose WSAIoctl(SIO_UDP_NETRESET) Wine refuses so, the call now succeeds with no
 * output: reporting stays off, which is what the caller asked, because Wine does not report
 * WSAENETRESET on a UDP socket (an assumption: no Wine code path for it was found; Linux reports
 * such ICMP errors only with IP_RECVERR, which Wine does not set for it). Any other socket,
 * control code or error is Wine's own. Tested in internal/wintest, TestUDPNetReset.
 */
#include <winsock2.h>
#include <windows.h>

#include "winecompat.h"

#define AF_UNIX_ 1
#define UNIX_PATH_MAX_ 108
#define AFUNIX_MAGIC "runhcs-wine-afunix "
#define SIO_UDP_NETRESET_ 0x9800000FUL /* IOC_IN | IOC_VENDOR | 15 */
#define WSAEOPNOTSUPP_ 10045
/* No ws2_32 import: this DLL loads into every Go program, most of which never use Winsock. */
#define LOOPBACK_BE 0x0100007FUL /* 127.0.0.1 in network order, little-endian host */
#define PORT_SWAP(p) ((USHORT)((((p) & 0xFF) << 8) | (((p) >> 8) & 0xFF)))

typedef struct {
	ADDRESS_FAMILY sun_family;
	char sun_path[UNIX_PATH_MAX_];
} sockaddr_un_;

typedef SOCKET(WSAAPI *wsasocketw_fn)(int af, int type, int protocol, LPWSAPROTOCOL_INFOW info, GROUP g, DWORD flags);
typedef SOCKET(WSAAPI *socket_fn)(int af, int type, int protocol);
typedef int(WSAAPI *addr_fn)(SOCKET s, const struct sockaddr *name, int len);
typedef int(WSAAPI *getname_fn)(SOCKET s, struct sockaddr *name, int *len);
typedef int(WSAAPI *closesocket_fn)(SOCKET s);
typedef int(WSAAPI *wsaioctl_fn)(SOCKET s, DWORD code, LPVOID in, DWORD in_len, LPVOID out, DWORD out_len, LPDWORD ret,
				 LPWSAOVERLAPPED ov, LPWSAOVERLAPPED_COMPLETION_ROUTINE done);
typedef int(WSAAPI *getsockopt_fn)(SOCKET s, int level, int name, char *val, int *len);
typedef int(WSAAPI *wsagetlasterror_fn)(void);
typedef void(WSAAPI *wsasetlasterror_fn)(int err);
typedef void(WINAPI *get_acceptex_sockaddrs_fn)(PVOID buf, DWORD data_len, DWORD local_len, DWORD remote_len,
						 struct sockaddr **local, LPINT local_size, struct sockaddr **remote,
						 LPINT remote_size);

static wsasocketw_fn real_wsasocketw;
static socket_fn real_socket;
static addr_fn real_bind, real_connect;
static getname_fn real_getsockname, real_getpeername;
static closesocket_fn real_closesocket;
static get_acceptex_sockaddrs_fn real_get_acceptex_sockaddrs;

/*
 * One entry per AF_UNIX socket made here: its local and peer names. A listener's entry also
 * keeps its TCP port, which is how GetAcceptExSockaddrs recognises its connections. Entries of
 * bound sockets are kept after close (their names may still be read through pointers
 * GetAcceptExSockaddrs handed out), with the socket field cleared; a few bytes per listener.
 */
struct unix_sock {
	struct unix_sock *next;
	SOCKET s;	      /* INVALID_SOCKET once closed */
	USHORT port;	      /* the TCP port it is bound to (network order), 0 if unbound */
	sockaddr_un_ local;   /* sun_path empty: unnamed */
	sockaddr_un_ peer;
};

static CRITICAL_SECTION lock;
static struct unix_sock *socks;
static const sockaddr_un_ unnamed = {AF_UNIX_, ""}; /* copied, never handed out */

/* find returns s's entry, or NULL if s is not an AF_UNIX socket made here. Call with lock held. */
static struct unix_sock *find(SOCKET s)
{
	struct unix_sock *u;

	for (u = socks; u != NULL; u = u->next)
		if (u->s == s)
			return u;
	return NULL;
}

static BOOL is_unix(SOCKET s)
{
	BOOL yes;

	EnterCriticalSection(&lock);
	yes = find(s) != NULL;
	LeaveCriticalSection(&lock);
	return yes;
}

static SOCKET track(SOCKET s)
{
	struct unix_sock *u;

	if (s == INVALID_SOCKET)
		return s;
	u = HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, sizeof(*u));
	if (u == NULL) {
		real_closesocket(s);
		SetLastError(WSAENOBUFS);
		return INVALID_SOCKET;
	}
	u->s = s;
	u->local = unnamed;
	u->peer = unnamed;
	EnterCriticalSection(&lock);
	u->next = socks;
	socks = u;
	LeaveCriticalSection(&lock);
	return s;
}

static SOCKET WSAAPI compat_wsasocketw(int af, int type, int protocol, LPWSAPROTOCOL_INFOW info, GROUP g, DWORD flags)
{
	if (af != AF_UNIX_ || type != SOCK_STREAM || info != NULL)
		return real_wsasocketw(af, type, protocol, info, g, flags);
	if (protocol != 0) {
		SetLastError(WSAEPROTONOSUPPORT);
		return INVALID_SOCKET;
	}
	return track(real_wsasocketw(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, g, flags));
}

static SOCKET WSAAPI compat_socket(int af, int type, int protocol)
{
	if (af != AF_UNIX_ || type != SOCK_STREAM)
		return real_socket(af, type, protocol);
	if (protocol != 0) {
		SetLastError(WSAEPROTONOSUPPORT);
		return INVALID_SOCKET;
	}
	return track(real_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
}

/* unix_path copies name's path into path (a NUL-terminated Windows path in UTF-8, as Go
 * writes it); FALSE with the error set for a name that is not a usable AF_UNIX path. */
static BOOL unix_path(const struct sockaddr *name, int len, WCHAR *path, DWORD n)
{
	const sockaddr_un_ *sun = (const sockaddr_un_ *)name;
	int plen;

	if (name == NULL || len < (int)sizeof(ADDRESS_FAMILY) + 1 || len > (int)sizeof(sockaddr_un_)) {
		SetLastError(WSAEFAULT);
		return FALSE;
	}
	if (sun->sun_family != AF_UNIX_) {
		SetLastError(WSAEAFNOSUPPORT);
		return FALSE;
	}
	plen = (int)strnlen(sun->sun_path, len - sizeof(ADDRESS_FAMILY));
	if (plen == 0 || plen >= UNIX_PATH_MAX_) {
		SetLastError(WSAEINVAL); /* abstract or unnamed: Windows has neither */
		return FALSE;
	}
	plen = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, sun->sun_path, plen, path, n - 1);
	if (plen == 0) {
		SetLastError(WSAEINVAL);
		return FALSE;
	}
	path[plen] = 0;
	return TRUE;
}

static int WSAAPI compat_bind(SOCKET s, const struct sockaddr *name, int len)
{
	WCHAR path[MAX_PATH];
	struct sockaddr_in in = {0};
	int inlen = sizeof(in);
	char content[64];
	DWORD written, clen;
	unsigned port;
	HANDLE f;
	struct unix_sock *u;

	if (!is_unix(s))
		return real_bind(s, name, len);
	if (!unix_path(name, len, path, MAX_PATH))
		return SOCKET_ERROR;
	in.sin_family = AF_INET;
	in.sin_addr.s_addr = LOOPBACK_BE;
	if (real_bind(s, (struct sockaddr *)&in, sizeof(in)) == SOCKET_ERROR)
		return SOCKET_ERROR;
	if (real_getsockname(s, (struct sockaddr *)&in, &inlen) == SOCKET_ERROR)
		return SOCKET_ERROR;
	f = CreateFileW(path, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
	if (f == INVALID_HANDLE_VALUE) {
		DWORD err = GetLastError();

		/* Assumption for a missing folder (Windows' code is not documented): WSAEINVAL. */
		SetLastError(err == ERROR_FILE_EXISTS || err == ERROR_ALREADY_EXISTS ? WSAEADDRINUSE
				: err == ERROR_ACCESS_DENIED				 ? WSAEACCES
											 : WSAEINVAL);
		return SOCKET_ERROR;
	}
	CopyMemory(content, AFUNIX_MAGIC, sizeof(AFUNIX_MAGIC) - 1);
	clen = sizeof(AFUNIX_MAGIC) - 1;
	port = PORT_SWAP(in.sin_port);
	for (written = 10000; written > 0; written /= 10)
		if (port >= written || written == 1)
			content[clen++] = (char)('0' + port / written % 10);
	content[clen++] = '\n';
	if (!WriteFile(f, content, clen, &written, NULL) || written != clen) {
		CloseHandle(f);
		DeleteFileW(path);
		SetLastError(WSAENOBUFS);
		return SOCKET_ERROR;
	}
	CloseHandle(f);
	EnterCriticalSection(&lock);
	u = find(s);
	if (u != NULL) {
		u->port = in.sin_port;
		CopyMemory(&u->local, name, len);
		u->local.sun_path[UNIX_PATH_MAX_ - 1] = 0;
	}
	LeaveCriticalSection(&lock);
	return 0;
}

/* socket_port reads the port a path's socket listens on; 0 if the path is not such a socket. */
static USHORT socket_port(const WCHAR *path)
{
	char buf[64] = {0};
	DWORD got = 0;
	unsigned port = 0;
	const char *p;
	HANDLE f = CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
			       OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);

	if (f == INVALID_HANDLE_VALUE)
		return 0;
	ReadFile(f, buf, sizeof(buf) - 1, &got, NULL);
	CloseHandle(f);
	if (got <= sizeof(AFUNIX_MAGIC) - 1 || memcmp(buf, AFUNIX_MAGIC, sizeof(AFUNIX_MAGIC) - 1) != 0)
		return 0;
	for (p = buf + sizeof(AFUNIX_MAGIC) - 1; *p >= '0' && *p <= '9'; p++)
		port = port * 10 + (unsigned)(*p - '0');
	return port > 0 && port < 65536 ? PORT_SWAP(port) : 0;
}

static int WSAAPI compat_connect(SOCKET s, const struct sockaddr *name, int len)
{
	WCHAR path[MAX_PATH];
	struct sockaddr_in in = {0};
	struct unix_sock *u;

	if (!is_unix(s))
		return real_connect(s, name, len);
	if (!unix_path(name, len, path, MAX_PATH))
		return SOCKET_ERROR;
	in.sin_family = AF_INET;
	in.sin_addr.s_addr = LOOPBACK_BE;
	in.sin_port = socket_port(path);
	if (in.sin_port == 0) {
		SetLastError(WSAECONNREFUSED);
		return SOCKET_ERROR;
	}
	if (real_connect(s, (struct sockaddr *)&in, sizeof(in)) == SOCKET_ERROR)
		return SOCKET_ERROR;
	EnterCriticalSection(&lock);
	u = find(s);
	if (u != NULL) {
		CopyMemory(&u->peer, name, len);
		u->peer.sun_path[UNIX_PATH_MAX_ - 1] = 0;
	}
	LeaveCriticalSection(&lock);
	return 0;
}

/* give copies a name out as getsockname and getpeername do. */
static int give(const sockaddr_un_ *sun, struct sockaddr *name, int *len)
{
	int need = (int)(sizeof(ADDRESS_FAMILY) + strlen(sun->sun_path) + 1);

	if (name == NULL || len == NULL || *len < need) {
		SetLastError(WSAEFAULT);
		return SOCKET_ERROR;
	}
	CopyMemory(name, sun, need);
	*len = need;
	return 0;
}

static int WSAAPI compat_getsockname(SOCKET s, struct sockaddr *name, int *len)
{
	sockaddr_un_ sun;
	struct unix_sock *u;

	EnterCriticalSection(&lock);
	u = find(s);
	if (u != NULL)
		sun = u->local;
	LeaveCriticalSection(&lock);
	return u != NULL ? give(&sun, name, len) : real_getsockname(s, name, len);
}

static int WSAAPI compat_getpeername(SOCKET s, struct sockaddr *name, int *len)
{
	sockaddr_un_ sun;
	struct unix_sock *u;
	struct sockaddr_in in;
	int inlen = sizeof(in);

	EnterCriticalSection(&lock);
	u = find(s);
	if (u != NULL)
		sun = u->peer;
	LeaveCriticalSection(&lock);
	if (u == NULL)
		return real_getpeername(s, name, len);
	/* Not connected: the TCP socket's own error (WSAENOTCONN). */
	if (real_getpeername(s, (struct sockaddr *)&in, &inlen) == SOCKET_ERROR)
		return SOCKET_ERROR;
	return give(&sun, name, len);
}

static int WSAAPI compat_closesocket(SOCKET s)
{
	struct unix_sock *u, **p;

	EnterCriticalSection(&lock);
	for (p = &socks; (u = *p) != NULL; p = &u->next) {
		if (u->s != s)
			continue;
		if (u->port != 0) {
			u->s = INVALID_SOCKET; /* kept: see struct unix_sock */
		} else {
			*p = u->next;
			HeapFree(GetProcessHeap(), 0, u);
		}
		break;
	}
	LeaveCriticalSection(&lock);
	return real_closesocket(s);
}

static void WINAPI compat_get_acceptex_sockaddrs(PVOID buf, DWORD data_len, DWORD local_len, DWORD remote_len,
						 struct sockaddr **local, LPINT local_size, struct sockaddr **remote,
						 LPINT remote_size)
{
	struct sockaddr_in *in;
	struct unix_sock *u;
	int avail;

	real_get_acceptex_sockaddrs(buf, data_len, local_len, remote_len, local, local_size, remote, remote_size);
	if (local == NULL || *local == NULL || (*local)->sa_family != AF_INET || remote == NULL || *remote == NULL)
		return;
	in = (struct sockaddr_in *)*local;
	if (in->sin_addr.s_addr != LOOPBACK_BE)
		return;
	/* The remote slot in the caller's buffer, from *remote to its end. */
	avail = (int)((BYTE *)buf + data_len + local_len + remote_len - (BYTE *)*remote);
	if (avail < (int)sizeof(ADDRESS_FAMILY) + 1)
		return;
	EnterCriticalSection(&lock);
	for (u = socks; u != NULL; u = u->next) {
		if (u->port != in->sin_port || u->s == INVALID_SOCKET)
			continue;
		/* The listener's own name (heap memory the caller may read and write: Go's
		 * RawSockaddrAny.Sockaddr rewrites a leading NUL of a path to '@'), and an unnamed peer
		 * written into the caller's buffer. */
		*local = (struct sockaddr *)&u->local;
		if (local_size != NULL)
			*local_size = sizeof(u->local);
		ZeroMemory(*remote, avail < (int)sizeof(sockaddr_un_) ? avail : (int)sizeof(sockaddr_un_));
		((sockaddr_un_ *)*remote)->sun_family = AF_UNIX_;
		if (remote_size != NULL)
			*remote_size = sizeof(ADDRESS_FAMILY);
		break;
	}
	LeaveCriticalSection(&lock);
}

static wsaioctl_fn real_wsaioctl;
static getsockopt_fn real_getsockopt;
static wsagetlasterror_fn real_wsagetlasterror;
static wsasetlasterror_fn real_wsasetlasterror;

/* compat_wsaioctl: Wine's WSAIoctl, except SIO_UDP_NETRESET on a UDP socket (above). */
static int WSAAPI compat_wsaioctl(SOCKET s, DWORD code, LPVOID in, DWORD in_len, LPVOID out, DWORD out_len, LPDWORD ret,
				  LPWSAOVERLAPPED ov, LPWSAOVERLAPPED_COMPLETION_ROUTINE done)
{
	int rc = real_wsaioctl(s, code, in, in_len, out, out_len, ret, ov, done);
	int type = 0, len = sizeof(type);

	if (rc == 0 || code != SIO_UDP_NETRESET_ || real_wsagetlasterror() != WSAEOPNOTSUPP_)
		return rc;
	if (in == NULL || in_len < sizeof(BOOL) || ov != NULL || done != NULL ||
	    real_getsockopt(s, SOL_SOCKET, SO_TYPE, (char *)&type, &len) != 0 || type != SOCK_DGRAM) {
		real_wsasetlasterror(WSAEOPNOTSUPP_);
		return rc;
	}
	if (ret != NULL)
		*ret = 0;
	return 0;
}

BOOL winesock_install(void)
{
	HMODULE ws2 = LoadLibraryW(L"ws2_32.dll"), mswsock = LoadLibraryW(L"mswsock.dll");

	if (ws2 == NULL || mswsock == NULL)
		return FALSE;
	InitializeCriticalSection(&lock);
	real_wsasocketw = (wsasocketw_fn)(void *)GetProcAddress(ws2, "WSASocketW");
	real_socket = (socket_fn)(void *)GetProcAddress(ws2, "socket");
	real_bind = (addr_fn)(void *)GetProcAddress(ws2, "bind");
	real_connect = (addr_fn)(void *)GetProcAddress(ws2, "connect");
	real_getsockname = (getname_fn)(void *)GetProcAddress(ws2, "getsockname");
	real_getpeername = (getname_fn)(void *)GetProcAddress(ws2, "getpeername");
	real_closesocket = (closesocket_fn)(void *)GetProcAddress(ws2, "closesocket");
	real_get_acceptex_sockaddrs = (get_acceptex_sockaddrs_fn)(void *)GetProcAddress(mswsock, "GetAcceptExSockaddrs");
	real_wsaioctl = (wsaioctl_fn)(void *)GetProcAddress(ws2, "WSAIoctl");
	real_getsockopt = (getsockopt_fn)(void *)GetProcAddress(ws2, "getsockopt");
	real_wsagetlasterror = (wsagetlasterror_fn)(void *)GetProcAddress(ws2, "WSAGetLastError");
	real_wsasetlasterror = (wsasetlasterror_fn)(void *)GetProcAddress(ws2, "WSASetLastError");
	if (!real_wsasocketw || !real_socket || !real_bind || !real_connect || !real_getsockname || !real_getpeername ||
	    !real_closesocket || !real_get_acceptex_sockaddrs || !real_wsaioctl || !real_getsockopt ||
	    !real_wsagetlasterror || !real_wsasetlasterror)
		return FALSE;
	return winecompat_patch_export((BYTE *)ws2, "WSASocketW", (void *)compat_wsasocketw) &&
	       winecompat_patch_export((BYTE *)ws2, "socket", (void *)compat_socket) &&
	       winecompat_patch_export((BYTE *)ws2, "bind", (void *)compat_bind) &&
	       winecompat_patch_export((BYTE *)ws2, "connect", (void *)compat_connect) &&
	       winecompat_patch_export((BYTE *)ws2, "getsockname", (void *)compat_getsockname) &&
	       winecompat_patch_export((BYTE *)ws2, "getpeername", (void *)compat_getpeername) &&
	       winecompat_patch_export((BYTE *)ws2, "closesocket", (void *)compat_closesocket) &&
	       winecompat_patch_export((BYTE *)mswsock, "GetAcceptExSockaddrs", (void *)compat_get_acceptex_sockaddrs) &&
	       winecompat_patch_export((BYTE *)ws2, "WSAIoctl", (void *)compat_wsaioctl);
}
