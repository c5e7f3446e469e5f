package hostprocess

import (
	"context"
	"io"
	"time"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Host makes the job objects, tokens, accounts and bindings of HostProcess containers. Every
// method that ends something treats an already-gone object as done, so that the delete action
// after a killed shim can call them again.
type Host interface {
	// CreateJob creates the job object of container id (named JobName(id)) with limits; its
	// processes die when the last handle to it closes (with the shim).
	CreateJob(ctx context.Context, id string, limits Limits) (Job, error)
	// TerminateJob ends the job of container id if it still exists.
	TerminateJob(ctx context.Context, id string) error
	// Logon returns the token the container's processes run with: the shim's own when inherit
	// is set; for a local group, that of a new local account named account, member of the
	// group; for NT AUTHORITY\SYSTEM, LOCAL SERVICE or NETWORK SERVICE a service logon; for
	// any other name a logon of that account.
	Logon(ctx context.Context, user, account string, inherit bool) (Token, error)
	// DeleteAccount deletes the local account a Logon made (absent: done).
	DeleteAccount(ctx context.Context, account string) error
	// Bind makes target (a folder or a volume path) appear at path, read-only if readOnly,
	// until Unbind(path).
	Bind(ctx context.Context, path, target string, readOnly bool) error
	// Unbind removes the binding at path (absent: done).
	Unbind(ctx context.Context, path string) error
}

// Token is a logon token (a user's identity for the processes of a job).
type Token interface {
	Close() error
}

// Job is a container's job object: its processes, limits and accounting.
type Job interface {
	// Start creates a process in the job and starts it.
	Start(ctx context.Context, p *ProcessSpec) (Process, error)
	// SetLimits applies limits; a zero member removes that limit.
	SetLimits(ctx context.Context, limits Limits) error
	// Stats returns the job's accounting (processor times, memory, I/O) as HCS reports a
	// container's; Uptime and ContainerStartTime are the caller's.
	Stats(ctx context.Context) (*schema2.Statistics, error)
	// Pids lists the processes in the job.
	Pids(ctx context.Context) ([]uint32, error)
	// Terminate ends every process in the job.
	Terminate(ctx context.Context) error
	// Close releases the handle (which, for the last one, ends the job's processes).
	Close() error
}

// Process is a process in a job, answering as an HCS process does (internal/shim/task's
// HCSProcess).
type Process interface {
	Pid() uint32
	Stdio() (stdin io.WriteCloser, stdout, stderr io.ReadCloser)
	// Signal delivers a console control event.
	Signal(ctx context.Context, o *schema2.SignalProcessOptions) (delivered bool, err error)
	Kill(ctx context.Context) (delivered bool, err error)
	Exited() <-chan struct{}
	ExitCode() (int, error)
	ResizeConsole(ctx context.Context, width, height uint16) error
	Close() error
}

// Limits are a job's resource limits, in the units of the runtime spec and of hcsshim's
// io.microsoft.container.* annotations; zero means none.
type Limits struct {
	// CPUCount is a number of the host's processors; CPUMaximum a share of all of them in
	// 1/10000ths; CPUWeight a relative weight of 1..10000. At most one of them is set.
	CPUCount, CPUMaximum, CPUWeight uint32
	// MemoryBytes bounds the memory committed by all the job's processes together.
	MemoryBytes uint64
}

// ProcessSpec is a process to start in a job.
type ProcessSpec struct {
	// CommandLine is the Windows command line; its first word is looked up in Dir, then in
	// the PATH of Env, with .COM, .EXE, .BAT, .CMD and no extension, as hcsshim does.
	CommandLine string
	Dir         string
	// Env is added to the token's default environment (later entries win).
	Env []string
	// PathSuffix is appended to the PATH the process gets (PathSuffix).
	PathSuffix []string
	Token      Token
	// Terminal asks for a pseudo console of Width x Height; otherwise the Stdin, Stdout and
	// Stderr pipes asked for are made.
	Terminal              bool
	Width, Height         uint16
	Stdin, Stdout, Stderr bool
}

// JobName is the name of container id's job object, as hcsshim names it
// (internal/jobcontainers/jobcontainer.go: jobContainerNameFmt "JobContainer_%s").
func JobName(id string) string { return "JobContainer_" + id }

// Uptime is the time since start, in HCS's 100ns units.
func Uptime(start time.Time) uint64 { return uint64(time.Since(start).Nanoseconds() / 100) }
