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
 *   unknown account or a wrong password. The local accounts below log on with their password.
 * - Local accounts (the temporary account hcsshim makes for a HostProcess container whose user
 *   is a local group: NetUserAdd, LookupAccountNameW, NetLocalGroupAddMembers, LogonUserW,
 *   NetUserDel). Wine 8 keeps none: its NetUserAdd lists users in the calling process's memory
 *   only, so the account a shim made was unknown to the shim's delete action (another process)
 *   and to every check that it is gone. Here they are kept in the prefix's registry,
 *   HKLM\Software\runhcs\wineaccount\Users\<name> (Password, Rid, and a Groups key naming
 *   the local groups it is a member of), shared by every process of the prefix and serialized
 *   by a named mutex. What Windows answers, as documented ("NetUserAdd function", "NetUserDel
 *   function", "NetUserGetInfo function", "NetLocalGroupAddMembers function"):
 *   - NetUserAdd level 1: NERR_UserExists for an account that exists, NERR_GroupExists for the
 *     name of a local group, ERROR_INVALID_PARAMETER with *parm_err USER_PRIV_PARMNUM when
 *     usri1_priv is not USER_PRIV_USER ("must be USER_PRIV_USER"). Assumptions: a name that is
 *     empty, longer than 20 characters ("User names are limited to 20 characters") or holds
 *     one of " / \ [ ] : ; | = , + * ? < > @ fails with ERROR_INVALID_PARAMETER and
 *     USER_NAME_PARMNUM; no password policy is applied; levels 2 to 4 answer ERROR_INVALID_LEVEL
 *     (not emulated);
 *   - LookupAccountNameW of NAME, .\NAME or COMPUTER\NAME: the account's SID, SidTypeUser,
 *     the computer's name as its domain. The SID is S-1-5-21-0-0-0-<rid> with rids from 1001
 *     (Wine's own user is S-1-5-21-0-0-0-1000); DEVIATION: LookupAccountSidW does not know it;
 *   - NetLocalGroupAddMembers levels 0 (SIDs) and 3 (names) for these accounts: NERR_GroupNotFound
 *     for a name that is no local group, ERROR_MEMBER_IN_ALIAS for a member already in it;
 *     members that are not these accounts go to Wine's function;
 *   - LogonUserW (interactive, network or batch) with the account's password: a primary token,
 *     the caller's own duplicated (DEVIATION: Wine has one identity); a wrong password fails
 *     with ERROR_LOGON_FAILURE;
 *   - NetUserGetInfo level 0 and NetUserDel: NERR_UserNotFound once it is gone.
 *
 * Go programs find them with GetProcAddress (golang.org/x/sys/windows' lazy procs), after this
 * DLL patched the exports, so winecompat_install loads netapi32 and advapi32 first.
 * Tested in internal/wintest, TestLocalGroupGetInfo, TestLogonServiceAccounts and
 * TestLocalAccounts, and through internal/hostprocess TestLogonGroupMember.
 */
#include <windows.h>

#include "winecompat.h"

#define NERR_SUCCESS_ 0
#define NERR_GROUP_NOT_FOUND_ 2220 /* lmerr.h: NERR_BASE + 120 */
#define NERR_USER_NOT_FOUND_ 2221  /* NERR_BASE + 121 */
#define NERR_GROUP_EXISTS_ 2223	   /* NERR_BASE + 123 */
#define NERR_USER_EXISTS_ 2224	   /* NERR_BASE + 124 */
#define ERROR_MEMBER_IN_ALIAS_ 1378
#define USER_PRIV_USER_ 1
#define USER_NAME_PARMNUM_ 1
#define USER_PRIV_PARMNUM_ 5
#define LOGON32_LOGON_INTERACTIVE_ 2
#define LOGON32_LOGON_NETWORK_ 3
#define LOGON32_LOGON_BATCH_ 4
#define LOGON32_LOGON_SERVICE_ 5
#define MAX_ACCOUNT_NAME 20
#define FIRST_RID 1001

/* lmaccess.h's USER_INFO_0, USER_INFO_1, LOCALGROUP_MEMBERS_INFO_0 and _3. */
typedef struct {
	LPWSTR name;
} user_info_0;
typedef struct {
	LPWSTR name, password;
	DWORD password_age, priv;
	LPWSTR home_dir, comment;
	DWORD flags;
	LPWSTR script_path;
} user_info_1;
typedef struct {
	PSID sid;
} members_info_0;
typedef struct {
	LPWSTR domain_and_name;
} members_info_3;

typedef DWORD(WINAPI *group_get_info_fn)(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE *buf);
typedef DWORD(WINAPI *user_add_fn)(LPCWSTR server, DWORD level, LPBYTE buf, LPDWORD parm_err);
typedef DWORD(WINAPI *user_del_fn)(LPCWSTR server, LPCWSTR user);
typedef DWORD(WINAPI *user_get_info_fn)(LPCWSTR server, LPCWSTR user, DWORD level, LPBYTE *buf);
typedef DWORD(WINAPI *add_members_fn)(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE buf, DWORD n);
typedef DWORD(WINAPI *buffer_allocate_fn)(DWORD size, LPVOID *buf);
typedef BOOL(WINAPI *lookup_name_fn)(LPCWSTR system, LPCWSTR name, PSID sid, LPDWORD sid_size, LPWSTR domain,
				     LPDWORD domain_len, PSID_NAME_USE use);

static group_get_info_fn real_group_get_info;
static user_add_fn real_user_add;
static user_del_fn real_user_del;
static user_get_info_fn real_user_get_info;
static add_members_fn real_add_members;
static buffer_allocate_fn buffer_allocate;
static lookup_name_fn real_lookup_name;

static const WCHAR users_key[] = L"Software\\runhcs\\wineaccount\\Users";

/* account_sid looks name up (DOMAIN\NAME or NAME) into sid with Wine's own function; FALSE if
 * no account has it. */
static BOOL account_sid(LPCWSTR name, BYTE *sid, DWORD sid_size, SID_NAME_USE *use)
{
	WCHAR domain[256];
	DWORD domain_len = sizeof(domain) / sizeof(domain[0]);

	return real_lookup_name(NULL, name, (PSID)sid, &sid_size, domain, &domain_len, use);
}

static BOOL is_local_group(LPCWSTR name)
{
	BYTE sid[SECURITY_MAX_SID_SIZE];
	SID_NAME_USE use;

	return account_sid(name, sid, sizeof(sid), &use) && use == SidTypeAlias;
}

static BOOL local_server(LPCWSTR server) { return server == NULL || server[0] == 0; }

/* lock serializes the account store between the prefix's processes; unlock releases it. */
static HANDLE lock(void)
{
	HANDLE m = CreateMutexW(NULL, FALSE, L"runhcs-wineaccount");

	if (m != NULL)
		WaitForSingleObject(m, INFINITE);
	return m;
}

static void unlock(HANDLE m)
{
	if (m != NULL) {
		ReleaseMutex(m);
		CloseHandle(m);
	}
}

/* local_name is name without a ".\" or "COMPUTER\" prefix, or NULL if it names another domain. */
static LPCWSTR local_name(LPCWSTR name)
{
	WCHAR computer[MAX_COMPUTERNAME_LENGTH + 1];
	DWORD n = sizeof(computer) / sizeof(computer[0]);
	LPCWSTR sep = name;

	while (*sep != 0 && *sep != L'\\')
		sep++;
	if (*sep == 0)
		return name;
	if (sep - name == 1 && name[0] == L'.')
		return sep + 1;
	if (GetComputerNameW(computer, &n) && (DWORD)(sep - name) == n && CompareStringOrdinal(name, n, computer, n, TRUE) == CSTR_EQUAL)
		return sep + 1;
	return NULL;
}

/* open_account opens the account's key (access rights), or returns NULL if there is none. */
static HKEY open_account(LPCWSTR name, REGSAM access)
{
	WCHAR path[sizeof(users_key) / sizeof(WCHAR) + MAX_ACCOUNT_NAME + 2];
	HKEY k;

	if (name == NULL || name[0] == 0 || lstrlenW(name) > MAX_ACCOUNT_NAME)
		return NULL;
	lstrcpyW(path, users_key);
	lstrcatW(path, L"\\");
	lstrcatW(path, name);
	if (RegOpenKeyExW(HKEY_LOCAL_MACHINE, path, 0, access, &k) != ERROR_SUCCESS)
		return NULL;
	return k;
}

static DWORD account_rid(HKEY k)
{
	DWORD rid = 0, size = sizeof(rid);

	RegQueryValueExW(k, L"Rid", NULL, NULL, (BYTE *)&rid, &size);
	return rid;
}

/* make_sid writes S-1-5-21-0-0-0-rid into sid (SECURITY_MAX_SID_SIZE bytes). */
static BOOL make_sid(DWORD rid, BYTE *sid)
{
	static SID_IDENTIFIER_AUTHORITY nt = {SECURITY_NT_AUTHORITY};
	PSID p;
	BOOL ok;

	if (!AllocateAndInitializeSid(&nt, 5, SECURITY_NT_NON_UNIQUE, 0, 0, 0, rid, 0, 0, 0, &p))
		return FALSE;
	ok = CopySid(SECURITY_MAX_SID_SIZE, (PSID)sid, p);
	FreeSid(p);
	return ok;
}

/* account_of_sid finds the account whose SID is sid: its name into name (MAX_ACCOUNT_NAME + 1). */
static BOOL account_of_sid(PSID sid, WCHAR *name)
{
	BYTE want[SECURITY_MAX_SID_SIZE];
	HKEY users, k;
	DWORD i, n;
	BOOL found = FALSE;

	if (!IsValidSid(sid) || RegOpenKeyExW(HKEY_LOCAL_MACHINE, users_key, 0, KEY_READ, &users) != ERROR_SUCCESS)
		return FALSE;
	for (i = 0; !found; i++) {
		n = MAX_ACCOUNT_NAME + 1;
		if (RegEnumKeyExW(users, i, name, &n, NULL, NULL, NULL, NULL) != ERROR_SUCCESS)
			break;
		if ((k = open_account(name, KEY_READ)) == NULL)
			continue;
		found = make_sid(account_rid(k), want) && EqualSid(sid, (PSID)want);
		RegCloseKey(k);
	}
	RegCloseKey(users);
	return found;
}

static BOOL valid_account_name(LPCWSTR name)
{
	static const WCHAR bad[] = L"\"/\\[]:;|=,+*?<>@";
	int i, n = name == NULL ? 0 : lstrlenW(name);
	BOOL dots = TRUE;

	if (n == 0 || n > MAX_ACCOUNT_NAME)
		return FALSE;
	for (i = 0; i < n; i++) {
		const WCHAR *b;

		for (b = bad; *b != 0; b++)
			if (name[i] == *b || name[i] < 32)
				return FALSE;
		if (name[i] != L'.' && name[i] != L' ')
			dots = FALSE;
	}
	return !dots;
}

static DWORD WINAPI compat_user_add(LPCWSTR server, DWORD level, LPBYTE buf, LPDWORD parm_err)
{
	const user_info_1 *ui = (const user_info_1 *)buf;
	WCHAR path[sizeof(users_key) / sizeof(WCHAR) + MAX_ACCOUNT_NAME + 2];
	HKEY users, k;
	DWORD disposition, rid = FIRST_RID, size = sizeof(rid), err;
	HANDLE m;

	if (!local_server(server))
		return real_user_add(server, level, buf, parm_err);
	if (level != 1)
		return ERROR_INVALID_LEVEL;
	if (ui == NULL)
		return ERROR_INVALID_PARAMETER;
	if (!valid_account_name(ui->name)) {
		if (parm_err != NULL)
			*parm_err = USER_NAME_PARMNUM_;
		return ERROR_INVALID_PARAMETER;
	}
	if (ui->priv != USER_PRIV_USER_) {
		if (parm_err != NULL)
			*parm_err = USER_PRIV_PARMNUM_;
		return ERROR_INVALID_PARAMETER;
	}
	if (is_local_group(ui->name))
		return NERR_GROUP_EXISTS_;
	m = lock();
	err = RegCreateKeyExW(HKEY_LOCAL_MACHINE, users_key, 0, NULL, 0, KEY_ALL_ACCESS, NULL, &users, NULL);
	if (err != ERROR_SUCCESS) {
		unlock(m);
		return err;
	}
	lstrcpyW(path, ui->name);
	err = RegCreateKeyExW(users, path, 0, NULL, 0, KEY_ALL_ACCESS, NULL, &k, &disposition);
	if (err == ERROR_SUCCESS && disposition != REG_CREATED_NEW_KEY) {
		RegCloseKey(k);
		err = NERR_USER_EXISTS_;
	} else if (err == ERROR_SUCCESS) {
		LPCWSTR pw = ui->password != NULL ? ui->password : L"";

		RegQueryValueExW(users, L"NextRid", NULL, NULL, (BYTE *)&rid, &size);
		err = RegSetValueExW(k, L"Password", 0, REG_SZ, (const BYTE *)pw, (lstrlenW(pw) + 1) * sizeof(WCHAR));
		if (err == ERROR_SUCCESS)
			err = RegSetValueExW(k, L"Rid", 0, REG_DWORD, (const BYTE *)&rid, sizeof(rid));
		rid++;
		if (err == ERROR_SUCCESS)
			err = RegSetValueExW(users, L"NextRid", 0, REG_DWORD, (const BYTE *)&rid, sizeof(rid));
		RegCloseKey(k);
		if (err != ERROR_SUCCESS)
			RegDeleteTreeW(users, path);
	}
	RegCloseKey(users);
	unlock(m);
	return err;
}

static DWORD WINAPI compat_user_del(LPCWSTR server, LPCWSTR user)
{
	HKEY users;
	LPCWSTR name;
	HANDLE m;
	DWORD err;

	if (!local_server(server))
		return real_user_del(server, user);
	if (user == NULL)
		return ERROR_INVALID_PARAMETER;
	name = local_name(user);
	m = lock();
	if (name == NULL || !valid_account_name(name) ||
	    RegOpenKeyExW(HKEY_LOCAL_MACHINE, users_key, 0, KEY_ALL_ACCESS, &users) != ERROR_SUCCESS) {
		unlock(m);
		return NERR_USER_NOT_FOUND_;
	}
	err = RegDeleteTreeW(users, name); /* the key with its values and Groups */
	RegCloseKey(users);
	unlock(m);
	return err == ERROR_SUCCESS ? NERR_SUCCESS_ : NERR_USER_NOT_FOUND_;
}

static DWORD WINAPI compat_user_get_info(LPCWSTR server, LPCWSTR user, DWORD level, LPBYTE *buf)
{
	LPCWSTR name;
	HKEY k;
	user_info_0 *ui;
	DWORD n, err;

	if (!local_server(server) || user == NULL || buf == NULL)
		return real_user_get_info(server, user, level, buf);
	name = local_name(user);
	if (name == NULL || (k = open_account(name, KEY_READ)) == NULL)
		return real_user_get_info(server, user, level, buf);
	RegCloseKey(k);
	if (level != 0)
		return ERROR_INVALID_LEVEL;
	n = (lstrlenW(name) + 1) * sizeof(WCHAR);
	err = buffer_allocate(sizeof(*ui) + n, (LPVOID *)&ui);
	if (err != NERR_SUCCESS_)
		return err;
	ui->name = (LPWSTR)(ui + 1);
	lstrcpyW(ui->name, name);
	*buf = (LPBYTE)ui;
	return NERR_SUCCESS_;
}

/* add_member makes the account name a member of group: ERROR_MEMBER_IN_ALIAS if it is one. */
static DWORD add_member(LPCWSTR name, LPCWSTR group)
{
	HKEY k, groups;
	DWORD err, one = 1, disposition;

	if ((k = open_account(name, KEY_ALL_ACCESS)) == NULL)
		return ERROR_NO_SUCH_MEMBER;
	err = RegCreateKeyExW(k, L"Groups", 0, NULL, 0, KEY_ALL_ACCESS, NULL, &groups, &disposition);
	RegCloseKey(k);
	if (err != ERROR_SUCCESS)
		return err;
	if (RegQueryValueExW(groups, group, NULL, NULL, NULL, NULL) == ERROR_SUCCESS)
		err = ERROR_MEMBER_IN_ALIAS_;
	else
		err = RegSetValueExW(groups, group, 0, REG_DWORD, (const BYTE *)&one, sizeof(one));
	RegCloseKey(groups);
	return err;
}

static DWORD WINAPI compat_add_members(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE buf, DWORD n)
{
	WCHAR name[MAX_ACCOUNT_NAME + 1];
	DWORD i, err = NERR_SUCCESS_;
	HANDLE m;
	HKEY k;

	if (!local_server(server) || (level != 0 && level != 3) || buf == NULL)
		return real_add_members(server, group, level, buf, n);
	if (group == NULL || !is_local_group(group))
		return NERR_GROUP_NOT_FOUND_;
	m = lock();
	for (i = 0; i < n && err == NERR_SUCCESS_; i++) {
		LPCWSTR member = NULL;

		if (level == 0 && account_of_sid(((members_info_0 *)buf)[i].sid, name)) {
			member = name;
		} else if (level == 3 && ((members_info_3 *)buf)[i].domain_and_name != NULL) {
			member = local_name(((members_info_3 *)buf)[i].domain_and_name);
			if (member != NULL && (k = open_account(member, KEY_READ)) != NULL)
				RegCloseKey(k);
			else
				member = NULL;
		}
		if (member != NULL)
			err = add_member(member, group);
		else
			err = real_add_members(server, group, level, buf + i * (level == 0 ? sizeof(members_info_0) : sizeof(members_info_3)), 1);
	}
	unlock(m);
	return err;
}

static BOOL WINAPI compat_lookup_name(LPCWSTR system, LPCWSTR name, PSID sid, LPDWORD sid_size, LPWSTR domain,
				      LPDWORD domain_len, PSID_NAME_USE use)
{
	BYTE s[SECURITY_MAX_SID_SIZE];
	WCHAR computer[MAX_COMPUTERNAME_LENGTH + 1];
	DWORD n = sizeof(computer) / sizeof(computer[0]), need;
	LPCWSTR local;
	HKEY k;

	if (!local_server(system) || name == NULL || sid_size == NULL || domain_len == NULL || use == NULL ||
	    (local = local_name(name)) == NULL || (k = open_account(local, KEY_READ)) == NULL)
		return real_lookup_name(system, name, sid, sid_size, domain, domain_len, use);
	if (!make_sid(account_rid(k), s) || !GetComputerNameW(computer, &n)) {
		RegCloseKey(k);
		return FALSE;
	}
	RegCloseKey(k);
	need = GetLengthSid((PSID)s);
	if (*sid_size < need || sid == NULL || *domain_len < n + 1 || domain == NULL) {
		*sid_size = need;
		*domain_len = n + 1;
		SetLastError(ERROR_INSUFFICIENT_BUFFER);
		return FALSE;
	}
	CopySid(*sid_size, sid, (PSID)s);
	*sid_size = need;
	lstrcpyW(domain, computer);
	*domain_len = n;
	*use = SidTypeUser;
	return TRUE;
}

static DWORD WINAPI compat_group_get_info(LPCWSTR server, LPCWSTR group, DWORD level, LPBYTE *buf)
{
	if (group == NULL || buf == NULL)
		return ERROR_INVALID_PARAMETER;
	if (local_server(server) && !is_local_group(group))
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

/* local_logon says whether user (of domain "", "." or the computer's) is a local account of
 * this store whose password is password. */
static BOOL local_logon(LPCWSTR user, LPCWSTR domain, LPCWSTR password)
{
	WCHAR stored[256], computer[MAX_COMPUTERNAME_LENGTH + 1];
	DWORD size = sizeof(stored), n = sizeof(computer) / sizeof(computer[0]), type;
	HKEY k;
	BOOL ok;

	if (domain != NULL && domain[0] != 0 && lstrcmpW(domain, L".") != 0 &&
	    (!GetComputerNameW(computer, &n) || CompareStringOrdinal(domain, -1, computer, -1, TRUE) != CSTR_EQUAL))
		return FALSE;
	if ((k = open_account(user, KEY_READ)) == NULL)
		return FALSE;
	ok = RegQueryValueExW(k, L"Password", NULL, &type, (BYTE *)stored, &size) == ERROR_SUCCESS && type == REG_SZ &&
	     lstrcmpW(stored, password != NULL ? password : L"") == 0;
	RegCloseKey(k);
	return ok;
}

static BOOL WINAPI compat_logon_user(LPCWSTR user, LPCWSTR domain, LPCWSTR password, DWORD type,
				     DWORD provider, PHANDLE token)
{
	WCHAR name[512];
	BYTE sid[SECURITY_MAX_SID_SIZE];
	SID_NAME_USE use;
	HANDLE self;
	BOOL ok, service;

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
	service = type == LOGON32_LOGON_SERVICE_ && account_sid(name, sid, sizeof(sid), &use) && service_rid((PSID)sid) != 0;
	if (!service && !((type == LOGON32_LOGON_INTERACTIVE_ || type == LOGON32_LOGON_NETWORK_ || type == LOGON32_LOGON_BATCH_) &&
			  local_logon(user, domain, password))) {
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
	real_user_add = (user_add_fn)(void *)GetProcAddress(netapi32, "NetUserAdd");
	real_user_del = (user_del_fn)(void *)GetProcAddress(netapi32, "NetUserDel");
	real_user_get_info = (user_get_info_fn)(void *)GetProcAddress(netapi32, "NetUserGetInfo");
	real_add_members = (add_members_fn)(void *)GetProcAddress(netapi32, "NetLocalGroupAddMembers");
	buffer_allocate = (buffer_allocate_fn)(void *)GetProcAddress(netapi32, "NetApiBufferAllocate");
	real_lookup_name = (lookup_name_fn)(void *)GetProcAddress(advapi32, "LookupAccountNameW");
	if (real_group_get_info == NULL || real_user_add == NULL || real_user_del == NULL || real_user_get_info == NULL ||
	    real_add_members == NULL || buffer_allocate == NULL || real_lookup_name == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)netapi32, "NetLocalGroupGetInfo", (void *)compat_group_get_info) &&
	       winecompat_patch_export((BYTE *)netapi32, "NetUserAdd", (void *)compat_user_add) &&
	       winecompat_patch_export((BYTE *)netapi32, "NetUserDel", (void *)compat_user_del) &&
	       winecompat_patch_export((BYTE *)netapi32, "NetUserGetInfo", (void *)compat_user_get_info) &&
	       winecompat_patch_export((BYTE *)netapi32, "NetLocalGroupAddMembers", (void *)compat_add_members) &&
	       winecompat_patch_export((BYTE *)advapi32, "LookupAccountNameW", (void *)compat_lookup_name) &&
	       winecompat_patch_export((BYTE *)advapi32, "LogonUserW", (void *)compat_logon_user);
}
