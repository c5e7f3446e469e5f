/*
 * emu.h: what the stand-in DLLs (computecore.dll, vmcompute.dll, and the next ones) share to
 * talk to hcsemu over loopback TCP (emu.c): UTF-16/UTF-8 strings, the wire protocol's frames
 * (a 4-byte big-endian length, then JSON; internal/hcsemu/wire), dialling $HCSEMU_TCP_ADDRESS
 * with the daemon's key, and a blocking call for DLLs whose functions wait for their answer (vmcompute's layer
 * functions, HNSCall).
 */
#ifndef RUNHCS_EMU_H
#define RUNHCS_EMU_H

#include <winsock2.h>
#include <windows.h>

#include "json.h"

/* EMU_MAX_FRAME is wire.MaxFrameSize: a longer frame is a broken connection. */
#define EMU_MAX_FRAME (16u << 20)

/* HRESULTs of the transport itself (HCS HRESULT reference). */
#define EMU_HR_OUTOFMEMORY ((HRESULT)0x8007000EL)
#define EMU_HR_SERVICE_NOT_AVAILABLE ((HRESULT)0x80370114L)
#define EMU_HR_SERVICE_DISCONNECT ((HRESULT)0x8037011EL)
#define EMU_HR_PROTOCOL_ERROR ((HRESULT)0x80370111L)

/* utf8_of converts a NUL-terminated UTF-16 string to a malloc'd UTF-8 one (NULL for NULL). */
char *utf8_of(PCWSTR w);
/* wide_of converts UTF-8 to UTF-16, with LocalAlloc when local (the caller frees it with
 * LocalFree), else malloc. */
WCHAR *wide_of(const char *s, int local);
char *dup_str(const char *s);

int send_all(SOCKET s, const char *p, int n);
int recv_all(SOCKET s, char *p, int n);
/* frame_write sends one frame; callers sharing a socket serialise their calls. */
int frame_write(SOCKET s, const char *json, size_t n);
/* frame_read receives one frame: a malloc'd, NUL-terminated body and its length, or NULL when
 * the connection ended or broke. */
char *frame_read(SOCKET s, size_t *n);
/* emu_dial connects to $HCSEMU_TCP_ADDRESS (host:port) and authenticates with the key in the
 * file $HCSEMU_TCP_KEY_FILE names (a Linux or a Windows path), as hcsemu requires of every TCP
 * connection before anything else; INVALID_SOCKET when either is unset, the connection is
 * refused or the key is (the first such failure is told on stderr). Every connection of every
 * stand-in goes through here. WSAStartup must have been called. */
SOCKET emu_dial(void);
/* emu_dial_control is emu_dial for a control connection (one that sends requests, not a
 * process's stream): it then tells the daemon this Wine prefix's drive mapping
 * (wire.MethodClientPaths), so that the host paths in its HCS documents resolve. */
SOCKET emu_dial_control(void);

/* emu_unix_path returns the Linux path Wine maps a Windows path to (malloc'd), or NULL. */
char *emu_unix_path(PCWSTR dos);
/* emu_dos_devices returns this prefix's dosdevices folder (malloc'd): Wine maps C:\ to
 * <prefix>/dosdevices/c:/. NULL if it cannot tell (not under Wine). */
char *emu_dos_devices(void);

/*
 * emu_call sends {"id","method":method,"args":args} on this process's blocking connection to
 * hcsemu (dialled at the first call, never redialled: after the daemon goes every call fails
 * with EMU_HR_SERVICE_DISCONNECT, as a process's RPC binding to a stopped service does) and
 * waits for its response. Calls are serialised. It returns the response's HRESULT (passed
 * through unchanged) and, if reply is not NULL, the response's reply as a malloc'd JSON text
 * (NULL when there is none), which the caller frees.
 */
HRESULT emu_call(const char *method, const char *args, char **reply);
/*
 * emu_call_doc is emu_call that also returns the response's "result" (the daemon's output or
 * error document, a JSON string on the wire), decoded to a malloc'd UTF-8 string, or NULL when
 * the response has none; the caller frees it. HCN's functions and HNSCall need it.
 */
HRESULT emu_call_doc(const char *method, const char *args, char **reply, char **result);

#endif
