package hostprocess

// The Win32 functions golang.org/x/sys/windows does not bind, declared for mkwinsyscall, each
// as Microsoft documents it (learn.microsoft.com/windows/win32/api/…). NET_API_STATUS results
// are returned as the error itself (neterr).

//sys logonUser(username *uint16, domain *uint16, password *uint16, logonType uint32, logonProvider uint32, token *windows.Token) (err error) = advapi32.LogonUserW
//sys netUserAdd(serverName *uint16, level uint32, buf *byte, parmErr *uint32) (neterr error) = netapi32.NetUserAdd
//sys netUserDel(serverName *uint16, userName *uint16) (neterr error) = netapi32.NetUserDel
//sys netLocalGroupGetInfo(serverName *uint16, groupName *uint16, level uint32, buf **byte) (neterr error) = netapi32.NetLocalGroupGetInfo
//sys netLocalGroupAddMembers(serverName *uint16, groupName *uint16, level uint32, buf *byte, totalEntries uint32) (neterr error) = netapi32.NetLocalGroupAddMembers
//sys openJobObject(desiredAccess uint32, inheritHandle bool, name *uint16) (handle windows.Handle, err error) = kernel32.OpenJobObjectW
//sys getProcessMemoryInfo(process windows.Handle, counters *processMemoryCountersEx2, cb uint32) (err error) = kernel32.K32GetProcessMemoryInfo
//sys attachConsole(pid uint32) (err error) = kernel32.AttachConsole
//sys freeConsole() (err error) = kernel32.FreeConsole
//sys setConsoleCtrlHandler(handler uintptr, add bool) (err error) = kernel32.SetConsoleCtrlHandler
//sys updateProcThreadAttribute(list *windows.ProcThreadAttributeList, flags uint32, attr uintptr, value uintptr, size uintptr, prev uintptr, retSize *uintptr) (err error) = kernel32.UpdateProcThreadAttribute
