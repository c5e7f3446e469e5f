/*
 * hcn.h: what the HNS stand-ins share (hcn.c): computenetwork.dll's HCN functions
 * (computenetwork/) and vmcompute.dll's HNSCall (vmcompute/hns.c) both hand documents back in
 * memory the caller frees with CoTaskMemFree, as the real DLLs do (hcsshim frees every one with
 * interop.ConvertAndFreeCoTaskMemString), and both call hcsemu's HNS over emu_call_doc.
 */
#ifndef RUNHCS_HCN_H
#define RUNHCS_HCN_H

#include <windows.h>

/* HRESULT_FROM_WIN32(ERROR_SERVICE_NOT_ACTIVE): what an HNS call answers when hcsemu cannot be
 * reached or has gone, as the Linux client (internal/hcsemu/client) answers it. */
#define HCN_HR_SERVICE_NOT_ACTIVE ((HRESULT)0x80070426L)

/* co_wide_of converts UTF-8 to UTF-16 in CoTaskMemAlloc'd memory; NULL when out of memory. */
WCHAR *co_wide_of(const char *s);

/*
 * hcn_call sends one HNS request (emu_call_doc) and sorts its answer as HCN does: on success
 * *out (if not NULL) receives the output document, on failure *record (if not NULL) receives
 * the error record, both CoTaskMemAlloc'd, and the other stays NULL (hcsshim takes any record
 * for an error, so a success never has one). reply, if not NULL, receives the response's reply
 * (malloc'd) on success only. The daemon's HRESULT is returned unchanged; the transport's own
 * failures (no daemon, connection gone) are HCN_HR_SERVICE_NOT_ACTIVE.
 */
HRESULT hcn_call(const char *method, const char *args, char **reply, PWSTR *out, PWSTR *record);

#endif
