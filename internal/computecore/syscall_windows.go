package computecore

// The computecore.dll functions, declared for mkwinsyscall, which writes zsyscall_windows.go.
// Signatures follow computecore.h (https://learn.microsoft.com/virtualization/api/hcs/reference/apioverview).
// Every HRESULT is returned raw (hr int32) rather than as an error, because mkwinsyscall would
// make it a syscall.Errno (folding FACILITY_WIN32 codes down to their Win32 number); the methods
// in computecore_windows.go turn it into an HRESULT error, which is what callers match. Strings are passed as *uint16 so that the
// callers decide when an empty string means NULL. The go:generate line is in generate.go, a
// file of every platform, so that `go generate` works on the Linux build machines too.

//sys	hcsCreateOperation(context uintptr, callback uintptr) (op Operation) = computecore.HcsCreateOperation
//sys	hcsCloseOperation(op Operation) = computecore.HcsCloseOperation
//sys	hcsGetOperationContext(op Operation) (context uintptr) = computecore.HcsGetOperationContext
//sys	hcsSetOperationContext(op Operation, context uintptr) (hr int32) = computecore.HcsSetOperationContext
//sys	hcsGetComputeSystemFromOperation(op Operation) (cs System) = computecore.HcsGetComputeSystemFromOperation
//sys	hcsGetProcessFromOperation(op Operation) (p Process) = computecore.HcsGetProcessFromOperation
//sys	hcsGetOperationType(op Operation) (t int32) = computecore.HcsGetOperationType
//sys	hcsGetOperationId(op Operation) (id uint64) = computecore.HcsGetOperationId
//sys	hcsGetOperationResult(op Operation, resultDocument **uint16) (hr int32) = computecore.HcsGetOperationResult
//sys	hcsGetOperationResultAndProcessInfo(op Operation, processInformation *ProcessInformation, resultDocument **uint16) (hr int32) = computecore.HcsGetOperationResultAndProcessInfo
//sys	hcsWaitForOperationResult(op Operation, timeoutMs uint32, resultDocument **uint16) (hr int32) = computecore.HcsWaitForOperationResult
//sys	hcsWaitForOperationResultAndProcessInfo(op Operation, timeoutMs uint32, processInformation *ProcessInformation, resultDocument **uint16) (hr int32) = computecore.HcsWaitForOperationResultAndProcessInfo
//sys	hcsCancelOperation(op Operation) (hr int32) = computecore.HcsCancelOperation

//sys	hcsCreateComputeSystem(id *uint16, configuration *uint16, op Operation, securityDescriptor uintptr, computeSystem *System) (hr int32) = computecore.HcsCreateComputeSystem
//sys	hcsOpenComputeSystem(id *uint16, requestedAccess uint32, computeSystem *System) (hr int32) = computecore.HcsOpenComputeSystem
//sys	hcsCloseComputeSystem(cs System) = computecore.HcsCloseComputeSystem
//sys	hcsEnumerateComputeSystems(query *uint16, op Operation) (hr int32) = computecore.HcsEnumerateComputeSystems
//sys	hcsStartComputeSystem(cs System, op Operation, options *uint16) (hr int32) = computecore.HcsStartComputeSystem
//sys	hcsShutDownComputeSystem(cs System, op Operation, options *uint16) (hr int32) = computecore.HcsShutDownComputeSystem
//sys	hcsTerminateComputeSystem(cs System, op Operation, options *uint16) (hr int32) = computecore.HcsTerminateComputeSystem
//sys	hcsPauseComputeSystem(cs System, op Operation, options *uint16) (hr int32) = computecore.HcsPauseComputeSystem
//sys	hcsResumeComputeSystem(cs System, op Operation, options *uint16) (hr int32) = computecore.HcsResumeComputeSystem
//sys	hcsGetComputeSystemProperties(cs System, op Operation, propertyQuery *uint16) (hr int32) = computecore.HcsGetComputeSystemProperties
//sys	hcsModifyComputeSystem(cs System, op Operation, configuration *uint16, identity uintptr) (hr int32) = computecore.HcsModifyComputeSystem
//sys	hcsWaitForComputeSystemExit(cs System, timeoutMs uint32, result **uint16) (hr int32) = computecore.HcsWaitForComputeSystemExit
//sys	hcsSetComputeSystemCallback(cs System, callbackOptions EventOptions, context uintptr, callback uintptr) (hr int32) = computecore.HcsSetComputeSystemCallback

//sys	hcsCreateProcess(cs System, processParameters *uint16, op Operation, securityDescriptor uintptr, process *Process) (hr int32) = computecore.HcsCreateProcess
//sys	hcsOpenProcess(cs System, processID uint32, requestedAccess uint32, process *Process) (hr int32) = computecore.HcsOpenProcess
//sys	hcsCloseProcess(p Process) = computecore.HcsCloseProcess
//sys	hcsTerminateProcess(p Process, op Operation, options *uint16) (hr int32) = computecore.HcsTerminateProcess
//sys	hcsSignalProcess(p Process, op Operation, options *uint16) (hr int32) = computecore.HcsSignalProcess
//sys	hcsGetProcessInfo(p Process, op Operation) (hr int32) = computecore.HcsGetProcessInfo
//sys	hcsGetProcessProperties(p Process, op Operation, propertyQuery *uint16) (hr int32) = computecore.HcsGetProcessProperties
//sys	hcsModifyProcess(p Process, op Operation, settings *uint16) (hr int32) = computecore.HcsModifyProcess
//sys	hcsWaitForProcessExit(p Process, timeoutMs uint32, result **uint16) (hr int32) = computecore.HcsWaitForProcessExit
//sys	hcsSetProcessCallback(p Process, callbackOptions EventOptions, context uintptr, callback uintptr) (hr int32) = computecore.HcsSetProcessCallback

//sys	hcsGetServiceProperties(propertyQuery *uint16, result **uint16) (hr int32) = computecore.HcsGetServiceProperties
//sys	hcsModifyServiceSettings(settings *uint16, result **uint16) (hr int32) = computecore.HcsModifyServiceSettings
