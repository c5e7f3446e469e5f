package schema2

import "time"

// ProcessParameters is the document passed to HcsCreateProcess.
type ProcessParameters struct {
	ApplicationName  string            `json:"ApplicationName,omitempty"`
	CommandLine      string            `json:"CommandLine,omitempty"`
	CommandArgs      []string          `json:"CommandArgs,omitempty"` // Linux guests only, as an alternative to CommandLine.
	User             string            `json:"User,omitempty"`
	WorkingDirectory string            `json:"WorkingDirectory,omitempty"`
	Environment      map[string]string `json:"Environment,omitempty"`
	RestrictedToken  bool              `json:"RestrictedToken,omitempty"`
	// EmulateConsole gives the process a pseudo console; its output then arrives on the stdout
	// pipe and CreateStdErrPipe is ignored.
	EmulateConsole   bool `json:"EmulateConsole,omitempty"`
	CreateStdInPipe  bool `json:"CreateStdInPipe,omitempty"`
	CreateStdOutPipe bool `json:"CreateStdOutPipe,omitempty"`
	CreateStdErrPipe bool `json:"CreateStdErrPipe,omitempty"`
	// ConsoleSize is the initial pseudo console size, height then width (the schema reference
	// documents it as an array of two uint16s). omitzero leaves it out when unset.
	ConsoleSize      [2]uint16 `json:"ConsoleSize,omitzero"`
	UseExistingLogin bool      `json:"UseExistingLogin,omitempty"`
	UseLegacyConsole bool      `json:"UseLegacyConsole,omitempty"`
}

// ConsoleSize is a pseudo console size, in ProcessModifyRequest.
type ConsoleSize struct {
	Height uint16 `json:"Height"`
	Width  uint16 `json:"Width"`
}

// ProcessModifyOperation is ProcessModifyRequest.Operation.
type ProcessModifyOperation string

const (
	ModifyProcessConsoleSize ProcessModifyOperation = "ConsoleSize"
	ModifyProcessCloseHandle ProcessModifyOperation = "CloseHandle"
)

// ProcessModifyRequest is the document passed to HcsModifyProcess: resize the console or close
// one of the process's std handles (on the HCS side of the pipe).
type ProcessModifyRequest struct {
	Operation   ProcessModifyOperation `json:"Operation,omitempty"`
	ConsoleSize *ConsoleSize           `json:"ConsoleSize,omitempty"`
	CloseHandle *CloseHandle           `json:"CloseHandle,omitempty"`
}

// StdHandle names a std handle in CloseHandle.
type StdHandle string

const (
	StdHandleStdIn  StdHandle = "StdIn"
	StdHandleStdOut StdHandle = "StdOut"
	StdHandleStdErr StdHandle = "StdErr"
	StdHandleAll    StdHandle = "All"
)

// CloseHandle is ProcessModifyRequest.CloseHandle.
type CloseHandle struct {
	Handle StdHandle `json:"Handle,omitempty"`
}

// ProcessSignal is a console control event, SignalProcessOptions.Signal.
type ProcessSignal string

const (
	SignalCtrlC        ProcessSignal = "CtrlC"
	SignalCtrlBreak    ProcessSignal = "CtrlBreak"
	SignalCtrlClose    ProcessSignal = "CtrlClose"
	SignalCtrlLogOff   ProcessSignal = "CtrlLogOff"
	SignalCtrlShutdown ProcessSignal = "CtrlShutdown"
)

// SignalProcessOptions is the options document of HcsSignalProcess.
type SignalProcessOptions struct {
	Signal ProcessSignal `json:"Signal,omitempty"`
}

// ProcessStatus is the document HcsGetProcessProperties returns. ExitCode is valid once Exited.
type ProcessStatus struct {
	ProcessId      uint32 `json:"ProcessId,omitempty"`
	Exited         bool   `json:"Exited,omitempty"`
	ExitCode       uint32 `json:"ExitCode,omitempty"`
	LastWaitResult int32  `json:"LastWaitResult,omitempty"`
}

// ProcessExitedEventData is the event data of an HcsEventProcessExited notification. Status is
// an HRESULT (0 when the exit code is valid).
type ProcessExitedEventData struct {
	Status   int32  `json:"Status"`
	ExitCode uint32 `json:"ExitCode"`
}

// ProcessDetails is one element of Properties.ProcessList.
type ProcessDetails struct {
	ProcessId                    uint32    `json:"ProcessId,omitempty"`
	ImageName                    string    `json:"ImageName,omitempty"`
	CreateTimestamp              time.Time `json:"CreateTimestamp,omitzero"`
	UserTime100ns                uint64    `json:"UserTime100ns,omitempty"`
	KernelTime100ns              uint64    `json:"KernelTime100ns,omitempty"`
	MemoryCommitBytes            uint64    `json:"MemoryCommitBytes,omitempty"`
	MemoryWorkingSetPrivateBytes uint64    `json:"MemoryWorkingSetPrivateBytes,omitempty"`
	MemoryWorkingSetSharedBytes  uint64    `json:"MemoryWorkingSetSharedBytes,omitempty"`
}
