/*
 * wineaccount.c: the two account functions a HostProcess container's logon needs
 * (internal/hostprocess Logon, docs/hostprocess.md) and Wine 8 only pretends to have. Installed
 * by winecompat_install (winecompat.c) under Wine only, in place of netapi32's export
 * NetLocalGroupGetInfo and advapi32's LogonUserW.
 *
 * Observed under Wine 8.0 (Debian 12), 2026-11-27, with a Windows Go program in the node's
 * prefix:
 * - NetLocalGroupGetInfo succeeds for every name ("semi-stub"): "Administrators",
 *   "NT AUTHORITY\SYSTEM" and "nosuchgroup" alike, so every account looked like a local group
 *   and the shim made a temporary account for NT AUTHORITY\SYSTEM;
 * - LogonUserW succeeds for every account and password with the token 0xdeadbeef, which is no
 *   handle: CreateProcessAsUserW with it fails with ERROR_INVALID_HANDLE.
 *
 * What Windows does, and what this reproduces:
 * - NetLocalGroupGetInfo on the local machine answers a local group (an alias: BUILTIN's, such
 *   as Administrators, or one made with NetLocalGroupAdd) and fails with NERR_GroupNotFound for
 *   any other name, a user or a well-known account such as NT AUTHORITY\SYSTEM among them
 *   (documented: "NetLocalGroupGetInfo function", return values). Here a name is a local group
 *   when LookupAccountNameW, which Wine implements for the well-known and BUILTIN accounts,
 *   says it is an alias (SidTypeAlias); then Wine's own function answers (its buffer, from
 *   NetApiBufferAllocate). A remote server name goes to Wine's function unchanged.
 * - LogonUserW with LOGON32_LOGON_SERVICE logs on the service accounts NT AUTHORITY\SYSTEM,
 *   LOCAL SERVICE and NETWORK SERVICE (S-1-5-18, -19, -20) without a password, for a caller
 *   that may (documented: "LogonUserW function"; hcsshim's jobcontainers logon.go logs a
 *   HostProcess container on so). Here that gives a primary token: a duplicate of the calling
 *   process's own. DEVIATION: Wine has one identity, so the process runs as the same Unix user
 *   whatever the account; only the logon's success and failure are reproduced. Any other logon
 *   (another account, another logon type) fails with ERROR_LOGON_FAILURE, as Windows answers an
 *   unknown account or a wrong password: Wine keeps no local accounts (its NetUserAdd lists
 *   users in the calling process's memory only), so a password cannot be checked. Assumption:
 *   no emulated program needs another logon; the temporary account of a group user is not
 *   emulated (docs/hostprocess.md says so).
 *
 * Go programs find both with GetProcAddress (golang.org/x/sys/windows' lazy procs), after this
 * DLL patched the exports, so winecompat_install loads netapi32 and advapi32 first.
 * Tested in internal/wintest, TestLocalGroupGetInfo and TestLogonServiceAccounts.
 */
#include <windows.h>

#include "winecompat.h"

#define NERR_GROUP_NOT_FOUND_ 2220 /* lmerr.h: NERR_BASE + 120 */
#define LOGON32_LOGON_SERVICE_ 5

typedef DWORD(WINAPI *group_get_info_fn)(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE *buf);

static group_get_info_fn real_group_get_info;

/* account_sid looks name up (DOMAIN\NAME or NAME) into sid; FALSE if no account has it. */
static BOOL account_sid(LPCWSTR name, BYTE *sid, DWORD sid_size, SID_NAME_USE *use)
{
	WCHAR domain[256];
	DWORD domain_len = sizeof(domain) / sizeof(domain[0]);

	return LookupAccountNameW(NULL, name, (PSID)sid, &sid_size, domain, &domain_len, use);
}

static DWORD WINAPI compat_group_get_info(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE *buf)
{
	BYTE sid[SECURITY_MAX_SID_SIZE];
	SID_NAME_USE use;

	if (group == NULL || buf == NULL)
		return ERROR_INVALID_PARAMETER;
	if ((server == NULL || server[0] == 0) &&
	    (!account_sid(group, sid, sizeof(sid), &use) || use != SidTypeAlias))
		return NERR_GROUP_NOT_FOUND_;
	return real_group_get_info(server, group, level, buf);
}

/* service_rid is the RID of a service account's SID (S-1-5-18, -19 or -20), 0 for any other. */
static DWORD service_rid(PSID sid)
{
	static const SID_IDENTIFIER_AUTHORITY nt = {SECURITY_NT_AUTHORITY};
	PSID_IDENTIFIER_AUTHORITY auth;
	DWORD rid;

	if (!IsValidSid(sid) || *GetSidSubAuthorityCount(sid) != 1)
		return 0;
	auth = GetSidIdentifierAuthority(sid);
	if (memcmp(auth, &nt, sizeof(nt)) != 0)
		return 0;
	rid = *GetSidSubAuthority(sid, 0);
	if (rid == SECURITY_LOCAL_SYSTEM_RID || rid == SECURITY_LOCAL_SERVICE_RID || rid == SECURITY_NETWORK_SERVICE_RID)
		return rid;
	return 0;
}

static BOOL WINAPI compat_logon_user(LPCWSTR user, LPCWSTR domain, LPCWSTR password, DWORD type,
				     DWORD provider, PHANDLE token)
{
	WCHAR name[512];
	BYTE sid[SECURITY_MAX_SID_SIZE];
	SID_NAME_USE use;
	HANDLE self;
	BOOL ok;

	(void)password;
	(void)provider;
	if (user == NULL || token == NULL) {
		SetLastError(ERROR_INVALID_PARAMETER);
		return FALSE;
	}
	*token = NULL;
	if (domain != NULL && domain[0] != 0 && lstrcmpW(domain, L".") != 0) {
		if (lstrlenW(domain) + 1 + lstrlenW(user) + 1 > (int)(sizeof(name) / sizeof(name[0]))) {
			SetLastError(ERROR_LOGON_FAILURE);
			return FALSE;
		}
		lstrcpyW(name, domain);
		lstrcatW(name, L"\\");
		lstrcatW(name, user);
	} else if (lstrlenW(user) + 1 <= (int)(sizeof(name) / sizeof(name[0]))) {
		lstrcpyW(name, user);
	} else {
		SetLastError(ERROR_LOGON_FAILURE);
		return FALSE;
	}
	if (type != LOGON32_LOGON_SERVICE_ || !account_sid(name, sid, sizeof(sid), &use) || service_rid((PSID)sid) == 0) {
		SetLastError(ERROR_LOGON_FAILURE);
		return FALSE;
	}
	if (!OpenProcessToken(GetCurrentProcess(), TOKEN_DUPLICATE | TOKEN_QUERY, &self))
		return FALSE;
	ok = DuplicateTokenEx(self, TOKEN_ALL_ACCESS, NULL, SecurityImpersonation, TokenPrimary, token);
	CloseHandle(self);
	return ok;
}

BOOL wineaccount_install(void)
{
	HMODULE netapi32 = LoadLibraryW(L"netapi32.dll");
	HMODULE advapi32 = LoadLibraryW(L"advapi32.dll");

	if (netapi32 == NULL || advapi32 == NULL)
		return FALSE;
	real_group_get_info = (group_get_info_fn)(void *)GetProcAddress(netapi32, "NetLocalGroupGetInfo");
	if (real_group_get_info == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)netapi32, "NetLocalGroupGetInfo", (void *)compat_group_get_info) &&
	       winecompat_patch_export((BYTE *)advapi32, "LogonUserW", (void *)compat_logon_user);
}
