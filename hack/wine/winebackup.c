/*
 * winebackup.c: BackupRead and BackupWrite for Wine 8, whose kernel32 answers both with
 * ERROR_NOT_SUPPORTED. go-winio's BackupFileReader/BackupFileWriter, and so hcsshim's
 * pkg/ociwclayer (layer import and export), read and write files through them. Installed by
 * winecompat_install (winecompat.c) under Wine only, in place of kernel32's exports.
 *
 * What they reproduce (https://learn.microsoft.com/windows/win32/api/winbase/nf-winbase-backupread,
 * .../nf-winbase-backupwrite, the WIN32_STREAM_ID structure .../ns-winbase-win32_stream_id, and
 * the NT backup file format, [MS-BKUP] 2.1-2.2): a file's backup is a sequence of streams, each a
 * WIN32_STREAM_ID header (stream id, attributes, 64-bit size, name size, then the name in UTF-16)
 * followed by Size bytes. The caller may split that sequence anywhere across calls; *lpContext
 * carries the position from one call to the next, and a call with bAbort TRUE ends it and frees
 * the context. Streams:
 *   - BACKUP_DATA: the file's unnamed data stream (written at the handle's position);
 *   - BACKUP_SECURITY_DATA: a self-relative security descriptor, applied
 *     (SetKernelObjectSecurity) or read (GetKernelObjectSecurity) only with bProcessSecurity;
 *   - BACKUP_ALTERNATE_DATA: a named data stream, "<file>:<name>:$DATA";
 *   - BACKUP_REPARSE_DATA: the file's reparse point (FSCTL_SET_REPARSE_POINT / _GET_).
 * Any other stream id fails the call with ERROR_NOT_SUPPORTED ([MS-BKUP] 2.1: a reader that
 * creates files MUST fail on a stream id it does not implement). Where Wine cannot do what a
 * stream asks (named streams, reparse points on Wine 8), the call fails with Wine's own error,
 * never silently.
 *
 * BackupRead produces the security descriptor (with bProcessSecurity), then the data of a file
 * (not of a folder), then its reparse point if it has one. Named streams are not enumerated:
 * Wine 8 has none to find.
 */
#include <windows.h>
#include <winioctl.h>
#include <stdlib.h>
#include <string.h>

#include "winecompat.h"

#define STREAM_HEADER 20 /* offsetof(WIN32_STREAM_ID, cStreamName) */
#define MAX_STREAM_NAME 65536
#define MAX_WHOLE_STREAM (64u << 20) /* a security descriptor or reparse buffer is far smaller */

/* ---- BackupWrite ---- */

struct writer {
	BYTE hdr[STREAM_HEADER];
	DWORD hdr_have;
	BYTE *name;
	DWORD name_size, name_have;
	int in_stream;
	DWORD id;
	ULONGLONG size, left;
	BYTE *whole; /* security or reparse data, applied when complete */
	SIZE_T whole_have;
	HANDLE alt; /* a named stream being written */
};

static void writer_free(struct writer *w)
{
	if (w == NULL)
		return;
	if (w->alt != NULL && w->alt != INVALID_HANDLE_VALUE)
		CloseHandle(w->alt);
	free(w->name);
	free(w->whole);
	free(w);
}

/* open_named opens "<path of file>:<name>" (name is ":stream:$DATA" as BackupRead gives it). */
static HANDLE open_named(HANDLE file, const BYTE *name, DWORD name_size, DWORD access, DWORD disposition)
{
	WCHAR path[MAX_PATH * 4];
	WCHAR *full;
	DWORD n = GetFinalPathNameByHandleW(file, path, MAX_PATH * 4, 0), k = name_size / sizeof(WCHAR);
	HANDLE h;

	if (n == 0 || n >= MAX_PATH * 4)
		return INVALID_HANDLE_VALUE;
	full = malloc((n + k + 1) * sizeof(WCHAR));
	if (full == NULL) {
		SetLastError(ERROR_NOT_ENOUGH_MEMORY);
		return INVALID_HANDLE_VALUE;
	}
	memcpy(full, path, n * sizeof(WCHAR));
	memcpy(full + n, name, k * sizeof(WCHAR));
	full[n + k] = 0;
	h = CreateFileW(full, access, 0, NULL, disposition, FILE_FLAG_BACKUP_SEMANTICS, NULL);
	free(full);
	return h;
}

/* security_info says which parts of a self-relative descriptor are present. */
static SECURITY_INFORMATION security_info(PSECURITY_DESCRIPTOR sd)
{
	SECURITY_DESCRIPTOR_CONTROL control = 0;
	DWORD revision;
	SECURITY_INFORMATION si = 0;
	PSID sid;
	BOOL defaulted, present;
	PACL acl;

	GetSecurityDescriptorControl(sd, &control, &revision);
	if (GetSecurityDescriptorOwner(sd, &sid, &defaulted) && sid != NULL)
		si |= OWNER_SECURITY_INFORMATION;
	if (GetSecurityDescriptorGroup(sd, &sid, &defaulted) && sid != NULL)
		si |= GROUP_SECURITY_INFORMATION;
	if (GetSecurityDescriptorDacl(sd, &present, &acl, &defaulted) && present)
		si |= DACL_SECURITY_INFORMATION;
	if (GetSecurityDescriptorSacl(sd, &present, &acl, &defaulted) && present)
		si |= SACL_SECURITY_INFORMATION;
	if (control & SE_DACL_PROTECTED)
		si |= PROTECTED_DACL_SECURITY_INFORMATION;
	return si;
}

/* stream_start begins a stream whose header (and name) is complete. */
static BOOL stream_start(HANDLE file, struct writer *w)
{
	memcpy(&w->id, w->hdr, 4);
	memcpy(&w->size, w->hdr + 8, 8);
	w->left = w->size;
	switch (w->id) {
	case BACKUP_DATA:
		break;
	case BACKUP_SECURITY_DATA:
	case BACKUP_REPARSE_DATA:
		if (w->size > MAX_WHOLE_STREAM) {
			SetLastError(ERROR_INVALID_DATA);
			return FALSE;
		}
		w->whole = malloc(w->size > 0 ? (size_t)w->size : 1);
		w->whole_have = 0;
		if (w->whole == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		break;
	case BACKUP_ALTERNATE_DATA: {
		DWORD flags = 0;

		/* A volume without named streams cannot take one (Wine 8's never can: it would
		 * create a file whose name holds the colon instead). Assumption: the error
		 * BackupWrite gives there is ERROR_NOT_SUPPORTED, as for other streams it cannot
		 * restore. */
		if (!GetVolumeInformationByHandleW(file, NULL, 0, NULL, NULL, &flags, NULL, 0) ||
		    !(flags & FILE_NAMED_STREAMS)) {
			SetLastError(ERROR_NOT_SUPPORTED);
			return FALSE;
		}
		w->alt = open_named(file, w->name, w->name_size, GENERIC_WRITE, CREATE_ALWAYS);
		if (w->alt == INVALID_HANDLE_VALUE) {
			w->alt = NULL;
			return FALSE;
		}
		break;
	}
	default:
		SetLastError(ERROR_NOT_SUPPORTED);
		return FALSE;
	}
	w->in_stream = 1;
	return TRUE;
}

/* stream_end applies a complete stream and gets ready for the next header. */
static BOOL stream_end(HANDLE file, struct writer *w, BOOL security)
{
	BOOL ok = TRUE;
	DWORD n;

	switch (w->id) {
	case BACKUP_SECURITY_DATA:
		if (security && w->whole_have > 0)
			ok = SetKernelObjectSecurity(file, security_info(w->whole), w->whole);
		break;
	case BACKUP_REPARSE_DATA:
		ok = DeviceIoControl(file, FSCTL_SET_REPARSE_POINT, w->whole, (DWORD)w->whole_have, NULL, 0, &n, NULL);
		break;
	case BACKUP_ALTERNATE_DATA:
		CloseHandle(w->alt);
		w->alt = NULL;
		break;
	}
	free(w->whole);
	w->whole = NULL;
	free(w->name);
	w->name = NULL;
	w->hdr_have = w->name_size = w->name_have = 0;
	w->in_stream = 0;
	return ok;
}

static BOOL WINAPI compat_backup_write(HANDLE file, LPBYTE buf, DWORD len, LPDWORD written, BOOL abort,
				       BOOL security, LPVOID *context)
{
	struct writer *w = *context;
	DWORD used = 0;

	if (abort) {
		writer_free(w);
		*context = NULL;
		if (written != NULL)
			*written = 0;
		return TRUE;
	}
	if (w == NULL) {
		w = calloc(1, sizeof(*w));
		if (w == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		*context = w;
	}
	while (used < len) {
		if (!w->in_stream && w->hdr_have < STREAM_HEADER) {
			DWORD k = min(STREAM_HEADER - w->hdr_have, len - used);

			memcpy(w->hdr + w->hdr_have, buf + used, k);
			w->hdr_have += k;
			used += k;
			if (w->hdr_have < STREAM_HEADER)
				break;
			memcpy(&w->name_size, w->hdr + 16, 4);
			if (w->name_size > MAX_STREAM_NAME || w->name_size % 2 != 0) {
				SetLastError(ERROR_INVALID_DATA);
				return FALSE;
			}
			w->name = malloc(w->name_size + 2);
			if (w->name == NULL) {
				SetLastError(ERROR_NOT_ENOUGH_MEMORY);
				return FALSE;
			}
		}
		if (!w->in_stream && w->name_have < w->name_size) {
			DWORD k = min(w->name_size - w->name_have, len - used);

			memcpy(w->name + w->name_have, buf + used, k);
			w->name_have += k;
			used += k;
			if (w->name_have < w->name_size)
				break;
		}
		if (!w->in_stream) {
			if (!stream_start(file, w))
				goto fail;
		}
		if (w->left > 0 && used < len) {
			DWORD k = (DWORD)min((ULONGLONG)(len - used), w->left), n = 0;

			switch (w->id) {
			case BACKUP_DATA:
				if (!WriteFile(file, buf + used, k, &n, NULL) || n != k)
					goto fail;
				break;
			case BACKUP_ALTERNATE_DATA:
				if (!WriteFile(w->alt, buf + used, k, &n, NULL) || n != k)
					goto fail;
				break;
			default:
				memcpy(w->whole + w->whole_have, buf + used, k);
				w->whole_have += k;
			}
			used += k;
			w->left -= k;
		}
		if (w->left == 0 && !stream_end(file, w, security))
			goto fail;
	}
	if (written != NULL)
		*written = used;
	return TRUE;
fail:
	if (written != NULL)
		*written = used;
	return FALSE;
}

/* ---- BackupRead ---- */

enum { R_SECURITY, R_DATA_HEADER, R_DATA, R_REPARSE, R_DONE };

struct reader {
	int stage;
	BYTE *pending; /* a header (and whole stream) to hand out */
	SIZE_T pending_len, pending_pos;
	ULONGLONG data_left;
};

static void reader_free(struct reader *r)
{
	if (r == NULL)
		return;
	free(r->pending);
	free(r);
}

/* set_pending queues a header for stream id with size bytes, followed by body if not NULL. */
static BOOL set_pending(struct reader *r, DWORD id, ULONGLONG size, const void *body)
{
	SIZE_T n = STREAM_HEADER + (body != NULL ? (SIZE_T)size : 0);
	DWORD zero = 0, attrs = id == BACKUP_SECURITY_DATA ? STREAM_CONTAINS_SECURITY : 0;

	r->pending = malloc(n);
	if (r->pending == NULL) {
		SetLastError(ERROR_NOT_ENOUGH_MEMORY);
		return FALSE;
	}
	memcpy(r->pending, &id, 4);
	memcpy(r->pending + 4, &attrs, 4);
	memcpy(r->pending + 8, &size, 8);
	memcpy(r->pending + 16, &zero, 4);
	if (body != NULL)
		memcpy(r->pending + STREAM_HEADER, body, (size_t)size);
	r->pending_len = n;
	r->pending_pos = 0;
	return TRUE;
}

/* next_stage queues what the next stage has to hand out, if anything. */
static BOOL next_stage(HANDLE file, struct reader *r, BOOL security)
{
	BY_HANDLE_FILE_INFORMATION info;

	if (!GetFileInformationByHandle(file, &info))
		return FALSE;
	switch (r->stage++) {
	case R_SECURITY: {
		DWORD need = 0;
		SECURITY_INFORMATION si = OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION |
					  DACL_SECURITY_INFORMATION;
		BYTE *sd;
		BOOL ok;

		if (!security)
			return TRUE;
		GetKernelObjectSecurity(file, si, NULL, 0, &need);
		if (need == 0)
			return FALSE;
		sd = malloc(need);
		if (sd == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		ok = GetKernelObjectSecurity(file, si, sd, need, &need) &&
		     set_pending(r, BACKUP_SECURITY_DATA, GetSecurityDescriptorLength(sd), sd);
		free(sd);
		return ok;
	}
	case R_DATA_HEADER:
		if (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
			r->stage = R_REPARSE;
			return TRUE;
		}
		r->data_left = (ULONGLONG)info.nFileSizeHigh << 32 | info.nFileSizeLow;
		return set_pending(r, BACKUP_DATA, r->data_left, NULL);
	case R_REPARSE: {
		BYTE *rp;
		DWORD n = 0;
		BOOL ok;

		if (!(info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT))
			return TRUE;
		rp = malloc(MAXIMUM_REPARSE_DATA_BUFFER_SIZE);
		if (rp == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		ok = DeviceIoControl(file, FSCTL_GET_REPARSE_POINT, NULL, 0, rp, MAXIMUM_REPARSE_DATA_BUFFER_SIZE, &n,
				     NULL) &&
		     set_pending(r, BACKUP_REPARSE_DATA, n, rp);
		free(rp);
		return ok;
	}
	}
	return TRUE;
}

static BOOL WINAPI compat_backup_read(HANDLE file, LPBYTE buf, DWORD len, LPDWORD read, BOOL abort, BOOL security,
				      LPVOID *context)
{
	struct reader *r = *context;
	DWORD got = 0;

	if (abort) {
		reader_free(r);
		*context = NULL;
		if (read != NULL)
			*read = 0;
		return TRUE;
	}
	if (r == NULL) {
		r = calloc(1, sizeof(*r));
		if (r == NULL) {
			SetLastError(ERROR_NOT_ENOUGH_MEMORY);
			return FALSE;
		}
		*context = r;
	}
	while (got < len) {
		if (r->pending != NULL) {
			SIZE_T k = min((SIZE_T)(len - got), r->pending_len - r->pending_pos);

			memcpy(buf + got, r->pending + r->pending_pos, k);
			got += (DWORD)k;
			r->pending_pos += k;
			if (r->pending_pos == r->pending_len) {
				free(r->pending);
				r->pending = NULL;
			}
			continue;
		}
		if (r->stage == R_DATA && r->data_left > 0) {
			DWORD k = (DWORD)min((ULONGLONG)(len - got), r->data_left), n = 0;

			if (!ReadFile(file, buf + got, k, &n, NULL))
				goto fail;
			if (n == 0) { /* the file shrank under us: the stream cannot be completed */
				SetLastError(ERROR_HANDLE_EOF);
				goto fail;
			}
			got += n;
			r->data_left -= n;
			continue;
		}
		if (r->stage == R_DATA)
			r->stage = R_REPARSE;
		if (r->stage >= R_DONE)
			break;
		if (!next_stage(file, r, security))
			goto fail;
	}
	if (read != NULL)
		*read = got;
	return TRUE;
fail:
	if (read != NULL)
		*read = got;
	return FALSE;
}

BOOL winebackup_install(void)
{
	HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");

	return kernel32 != NULL && winecompat_patch_export((BYTE *)kernel32, "BackupWrite", (void *)compat_backup_write) &&
	       winecompat_patch_export((BYTE *)kernel32, "BackupRead", (void *)compat_backup_read);
}
