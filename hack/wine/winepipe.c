/*
 * winepipe.c: a named pipe's server instance created without read or write access starts
 * disconnected, as on Windows; linked into bcryptprimitives.dll with winecompat.c and
 * installed the same way (ntdll's export table, under Wine only).
 *
 * The Windows behaviour. go-winio's ListenPipe (github.com/Microsoft/go-winio, pipe.go,
 * makeServerPipeHandle) creates the pipe's first instance with NtCreateNamedPipeFile asking for
 * SYNCHRONIZE access only, and relies on the named pipe file system putting such an instance
 * "into an initially disconnected state, blocking client connections until the next call" (its
 * comment): the instance only keeps the name and its security descriptor; go-winio never calls
 * ConnectNamedPipe on it, nor reads it. Each Accept makes a new instance with read and write
 * access and connects it with an overlapped ConnectNamedPipe, which either waits for a client
 * (ERROR_IO_PENDING) or reports one that connected to that instance between its creation and
 * the call (ERROR_PIPE_CONNECTED; both documented at
 * https://learn.microsoft.com/windows/win32/api/namedpipeapi/nf-namedpipeapi-connectnamedpipe),
 * so every client of a listening instance reaches Accept. A client that finds no listening
 * instance gets ERROR_PIPE_BUSY and
 * retries (https://learn.microsoft.com/windows/win32/ipc/named-pipe-client: "If the pipe
 * exists but all of its instances are busy, CreateFile returns INVALID_HANDLE_VALUE and
 * GetLastError returns ERROR_PIPE_BUSY"), as go-winio's DialPipe does. A disconnected instance
 * is connectable again only after ConnectNamedPipe
 * (https://learn.microsoft.com/windows/win32/api/namedpipeapi/nf-namedpipeapi-disconnectnamedpipe:
 * "the server must call ConnectNamedPipe before another client can connect to the pipe
 * instance").
 *
 * What Wine 8 does instead: wineserver starts every new server instance in the listening state,
 * whatever its access, and a client's CreateFile takes a listening instance; so a client that
 * comes before Accept's instance exists, or while it is not yet waiting in ConnectNamedPipe,
 * lands on go-winio's first instance, which nobody ever accepts: the client's writes stay
 * unread and Accept never returns that client. Every go-winio server under Wine (containerd's
 * ctr stdio pipes, which the shim dials; the shim's own pipes) hangs that way on its first
 * client (observed: internal/wintest TestPipeFirstClient, both orders of Dial and Accept).
 *
 * The fix: when NtCreateNamedPipeFile has created, with FILE_CREATE (so it is the pipe's only
 * instance, as go-winio's first is), a server instance whose access has neither FILE_READ_DATA
 * nor FILE_WRITE_DATA (nor GENERIC_READ, GENERIC_WRITE, GENERIC_ALL), this wrapper moves it to
 * the disconnected state with the only transitions Wine has: it opens a
 * client on it (the instance is the one just created and listening), disconnects it from the
 * server side (FSCTL_PIPE_DISCONNECT, DisconnectNamedPipe), and closes that client. The
 * instance is then FILE_PIPE_DISCONNECTED_STATE, which Wine, like Windows, does not give to
 * clients, and which ConnectNamedPipe turns back into listening. Instances with read or write
 * access (every CreateNamedPipe, go-winio's Accept) are untouched, and so is an instance added
 * to a pipe that has others (the client could land on one of those). Nothing in between can take
 * the instance except a client already retrying on that exact name in the microseconds between
 * the two calls; then the open below finds the pipe busy, and the instance is left as Wine made
 * it (the old behaviour).
 */
#include <windows.h>
#include <winternl.h>
#include <winioctl.h>

#include "winecompat.h"

typedef NTSTATUS(NTAPI *create_named_pipe_file_fn)(PHANDLE handle, ULONG access, POBJECT_ATTRIBUTES attr,
						    PIO_STATUS_BLOCK iosb, ULONG sharing, ULONG dispo,
						    ULONG options, ULONG pipe_type, ULONG read_mode,
						    ULONG completion_mode, ULONG max_inst, ULONG inbound_quota,
						    ULONG outbound_quota, PLARGE_INTEGER timeout);

typedef NTSTATUS(NTAPI *create_file_fn)(PHANDLE handle, ACCESS_MASK access, POBJECT_ATTRIBUTES attr,
					 PIO_STATUS_BLOCK iosb, PLARGE_INTEGER alloc_size, ULONG attributes,
					 ULONG sharing, ULONG dispo, ULONG options, PVOID ea_buffer,
					 ULONG ea_length);

typedef NTSTATUS(NTAPI *fs_control_file_fn)(HANDLE handle, HANDLE event, PVOID apc, PVOID apc_context,
					     PIO_STATUS_BLOCK iosb, ULONG code, PVOID in_buffer, ULONG in_size,
					     PVOID out_buffer, ULONG out_size);

typedef NTSTATUS(NTAPI *close_fn)(HANDLE handle);

static create_named_pipe_file_fn real_create_named_pipe_file;
static create_file_fn nt_create_file;
static fs_control_file_fn nt_fs_control_file;
static close_fn nt_close;

/* ntifs.h: CTL_CODE(FILE_DEVICE_NAMED_PIPE, 1, METHOD_BUFFERED, FILE_ANY_ACCESS). */
#define FSCTL_PIPE_DISCONNECT_ 0x00110004
#define FILE_OPEN_ 1
#define FILE_CREATE_ 2
#define FILE_NON_DIRECTORY_FILE_ 0x40
#define FILE_SYNCHRONOUS_IO_NONALERT_ 0x20

/* data_access: whether access lets the holder read or write the pipe's data. */
static BOOL data_access(ULONG access)
{
	return (access & (FILE_READ_DATA | FILE_WRITE_DATA | GENERIC_READ | GENERIC_WRITE | GENERIC_ALL)) != 0;
}

/* disconnect_new_instance moves the just-created listening server instance to disconnected. */
static void disconnect_new_instance(HANDLE server, POBJECT_ATTRIBUTES attr)
{
	OBJECT_ATTRIBUTES client_attr = *attr;
	IO_STATUS_BLOCK iosb;
	HANDLE client = NULL;

	/* The same name and root; no security descriptor or quality of service for a client. */
	client_attr.SecurityDescriptor = NULL;
	client_attr.SecurityQualityOfService = NULL;
	if (nt_create_file(&client, SYNCHRONIZE | FILE_READ_ATTRIBUTES, &client_attr, &iosb, NULL, 0,
			   FILE_SHARE_READ | FILE_SHARE_WRITE, FILE_OPEN_,
			   FILE_NON_DIRECTORY_FILE_ | FILE_SYNCHRONOUS_IO_NONALERT_, NULL, 0) < 0)
		return;
	nt_fs_control_file(server, NULL, NULL, NULL, &iosb, FSCTL_PIPE_DISCONNECT_, NULL, 0, NULL, 0);
	nt_close(client);
}

static NTSTATUS NTAPI compat_create_named_pipe_file(PHANDLE handle, ULONG access, POBJECT_ATTRIBUTES attr,
						     PIO_STATUS_BLOCK iosb, ULONG sharing, ULONG dispo,
						     ULONG options, ULONG pipe_type, ULONG read_mode,
						     ULONG completion_mode, ULONG max_inst, ULONG inbound_quota,
						     ULONG outbound_quota, PLARGE_INTEGER timeout)
{
	NTSTATUS status = real_create_named_pipe_file(handle, access, attr, iosb, sharing, dispo, options,
						      pipe_type, read_mode, completion_mode, max_inst,
						      inbound_quota, outbound_quota, timeout);

	if (status >= 0 && handle != NULL && attr != NULL && dispo == FILE_CREATE_ && !data_access(access))
		disconnect_new_instance(*handle, attr);
	return status;
}

BOOL winepipe_install(void)
{
	HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");

	if (ntdll == NULL)
		return FALSE;
	real_create_named_pipe_file =
		(create_named_pipe_file_fn)(void *)GetProcAddress(ntdll, "NtCreateNamedPipeFile");
	nt_create_file = (create_file_fn)(void *)GetProcAddress(ntdll, "NtCreateFile");
	nt_fs_control_file = (fs_control_file_fn)(void *)GetProcAddress(ntdll, "NtFsControlFile");
	nt_close = (close_fn)(void *)GetProcAddress(ntdll, "NtClose");
	if (real_create_named_pipe_file == NULL || nt_create_file == NULL || nt_fs_control_file == NULL ||
	    nt_close == NULL)
		return FALSE;
	return winecompat_patch_export((BYTE *)ntdll, "NtCreateNamedPipeFile", (void *)compat_create_named_pipe_file);
}
