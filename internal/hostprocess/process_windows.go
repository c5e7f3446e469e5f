package hostprocess

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf16"
	"unsafe"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Start creates the process suspended under the spec's token, assigns it to the job
// (AssignProcessToJobObject) and resumes it, so that nothing of it runs outside the job. It
// breaks away from the shim's own job (CREATE_BREAKAWAY_FROM_JOB, as hcsshim does). Without a
// terminal it gets a console of its own, hidden, so that console control events reach it and
// nothing else (GenerateConsoleCtrlEvent reaches the processes of one console).
func (j *winJob) Start(_ context.Context, p *ProcessSpec) (_ Process, retErr error) {
	h, err := j.handle()
	if err != nil {
		return nil, err
	}
	tok, ok := p.Token.(*winToken)
	if !ok || tok == nil {
		return nil, fmt.Errorf("start a process in job object %s: no logon token: %w", JobName(j.id), errdefs.ErrInvalidArgument)
	}
	env, err := tok.t.Environ(false)
	if err != nil {
		return nil, fmt.Errorf("the default environment of the process's account: %w", err)
	}
	env = mergeEnv(env, p.Env)
	env = appendPath(env, p.PathSuffix, ";")
	app, err := findApplication(p.CommandLine, p.Dir, envValue(env, "PATH"), func(s string) string { return s })
	if err != nil {
		return nil, err
	}

	wp := &winProcess{exited: make(chan struct{})}
	var closeAfterStart []windows.Handle
	defer func() {
		for _, ch := range closeAfterStart {
			_ = windows.CloseHandle(ch)
		}
		if retErr != nil {
			wp.closeStdio()
			if wp.pty != 0 {
				windows.ClosePseudoConsole(wp.pty)
			}
		}
	}()

	attrs, err := windows.NewProcThreadAttributeList(2)
	if err != nil {
		return nil, err
	}
	defer attrs.Delete()
	si := &windows.StartupInfoEx{ProcThreadAttributeList: attrs.List()}
	si.Cb = uint32(unsafe.Sizeof(*si))
	// The process inherits whether CTRL+C is processed (prepareConsoleControl).
	ctrlMu.Lock()
	err = prepareConsoleControl()
	ctrlMu.Unlock()
	if err != nil {
		return nil, err
	}
	flags := uint32(windows.CREATE_SUSPENDED | windows.CREATE_UNICODE_ENVIRONMENT | windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_BREAKAWAY_FROM_JOB)
	inherit := false
	if p.Terminal {
		inR, inW, err := pipe()
		if err != nil {
			return nil, err
		}
		outR, outW, err := pipe()
		if err != nil {
			_ = windows.CloseHandle(inR)
			_ = windows.CloseHandle(inW)
			return nil, err
		}
		closeAfterStart = append(closeAfterStart, inR, outW)
		wp.stdin, wp.stdout = os.NewFile(uintptr(inW), "stdin"), os.NewFile(uintptr(outR), "stdout")
		size := windows.Coord{X: int16(orDefault(p.Width, 80)), Y: int16(orDefault(p.Height, 25))}
		if err := windows.CreatePseudoConsole(size, inR, outW, 0, &wp.pty); err != nil {
			return nil, fmt.Errorf("create a pseudo console: %w", err)
		}
		if err := updateProcThreadAttribute(attrs.List(), 0, windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, uintptr(wp.pty), unsafe.Sizeof(wp.pty), 0, nil); err != nil {
			return nil, fmt.Errorf("attach the pseudo console: %w", err)
		}
	} else {
		flags |= windows.CREATE_NEW_CONSOLE
		si.Flags = windows.STARTF_USESTDHANDLES | windows.STARTF_USESHOWWINDOW
		si.ShowWindow = windows.SW_HIDE
		var handles []windows.Handle
		child := func(want, parentReads bool, name string) (windows.Handle, error) {
			if !want {
				nul, err := windows.CreateFile(windows.StringToUTF16Ptr("NUL"), windows.GENERIC_READ|windows.GENERIC_WRITE, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, inheritable(), windows.OPEN_EXISTING, 0, 0)
				if err != nil {
					return 0, err
				}
				closeAfterStart = append(closeAfterStart, nul)
				return nul, nil
			}
			r, w, err := pipe()
			if err != nil {
				return 0, err
			}
			c, parent := w, r
			if !parentReads {
				c, parent = r, w
			}
			closeAfterStart = append(closeAfterStart, c)
			_ = windows.SetHandleInformation(parent, windows.HANDLE_FLAG_INHERIT, 0)
			f := os.NewFile(uintptr(parent), name)
			switch name {
			case "stdin":
				wp.stdin = f
			case "stdout":
				wp.stdout = f
			default:
				wp.stderr = f
			}
			return c, nil
		}
		var err error
		if si.StdInput, err = child(p.Stdin, false, "stdin"); err != nil {
			return nil, err
		}
		if si.StdOutput, err = child(p.Stdout, true, "stdout"); err != nil {
			return nil, err
		}
		if si.StdErr, err = child(p.Stderr, true, "stderr"); err != nil {
			return nil, err
		}
		handles = append(handles, si.StdInput, si.StdOutput)
		if si.StdErr != si.StdOutput {
			handles = append(handles, si.StdErr)
		}
		// Only the stdio handles are inherited (PROC_THREAD_ATTRIBUTE_HANDLE_LIST).
		if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&handles[0]), uintptr(len(handles))*unsafe.Sizeof(handles[0])); err != nil {
			return nil, fmt.Errorf("restrict inherited handles: %w", err)
		}
		inherit = true
	}

	block := envBlock(env)
	var pi windows.ProcessInformation
	if err := windows.CreateProcessAsUser(tok.t, windows.StringToUTF16Ptr(app), windows.StringToUTF16Ptr(p.CommandLine), nil, nil, inherit, flags, &block[0], windows.StringToUTF16Ptr(p.Dir), &si.StartupInfo, &pi); err != nil {
		return nil, fmt.Errorf("create process %q in %q: %w", p.CommandLine, p.Dir, err)
	}
	defer windows.CloseHandle(pi.Thread)
	if err := windows.AssignProcessToJobObject(h, pi.Process); err != nil {
		_ = windows.TerminateProcess(pi.Process, exitCodeTerminated)
		_ = windows.CloseHandle(pi.Process)
		return nil, fmt.Errorf("assign process %d to job object %s: %w", pi.ProcessId, JobName(j.id), err)
	}
	if _, err := windows.ResumeThread(pi.Thread); err != nil {
		_ = windows.TerminateProcess(pi.Process, exitCodeTerminated)
		_ = windows.CloseHandle(pi.Process)
		return nil, fmt.Errorf("resume process %d: %w", pi.ProcessId, err)
	}
	wp.h, wp.pid = pi.Process, pi.ProcessId
	go wp.wait()
	return wp, nil
}

// winProcess is a process of a job.
type winProcess struct {
	h      windows.Handle
	pid    uint32
	pty    windows.Handle
	stdin  *os.File
	stdout *os.File
	stderr *os.File

	exited   chan struct{}
	mu       sync.Mutex // guards code, done, pty
	code     uint32
	done     bool
	closeOne sync.Once
}

func (p *winProcess) wait() {
	_, _ = windows.WaitForSingleObject(p.h, windows.INFINITE)
	var code uint32
	_ = windows.GetExitCodeProcess(p.h, &code)
	p.mu.Lock()
	p.code, p.done = code, true
	if p.pty != 0 {
		// The pseudo console's output reaches EOF only once it is closed.
		windows.ClosePseudoConsole(p.pty)
		p.pty = 0
	}
	p.mu.Unlock()
	close(p.exited)
}

func (p *winProcess) Pid() uint32 { return p.pid }

func (p *winProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser) {
	var in io.WriteCloser
	var out, errr io.ReadCloser
	if p.stdin != nil {
		in = p.stdin
	}
	if p.stdout != nil {
		out = p.stdout
	}
	if p.stderr != nil {
		errr = p.stderr
	}
	return in, out, errr
}

func (p *winProcess) Exited() <-chan struct{} { return p.exited }

func (p *winProcess) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		return -1, fmt.Errorf("process %d has not exited: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	return int(p.code), nil
}

// Kill terminates the process (TerminateProcess).
func (p *winProcess) Kill(context.Context) (bool, error) {
	select {
	case <-p.exited:
		return false, nil
	default:
	}
	if err := windows.TerminateProcess(p.h, exitCodeTerminated); err != nil {
		select {
		case <-p.exited:
			return false, nil
		default:
		}
		return false, fmt.Errorf("terminate process %d: %w", p.pid, err)
	}
	return true, nil
}

// ctrlMu serializes attaching the shim to a process's console (a process has one console) and
// the shim's console control set-up.
var (
	ctrlMu    sync.Mutex
	ctrlReady bool
)

// prepareConsoleControl readies the shim, once, for the console control events of its
// containers' processes (called with ctrlMu held):
//   - its own handler, which keeps the events it generates from ending it when it attaches to a
//     process's console to signal it (a handler returning TRUE ends the handler chain);
//   - CTRL+C processing enabled (SetConsoleCtrlHandler(NULL, FALSE)), which child processes
//     inherit: the shim's start action starts the serving shim with CREATE_NEW_PROCESS_GROUP,
//     which disables CTRL+C for the new group, and "this attribute of ignoring or processing
//     CTRL+C is inherited by child processes" (SetConsoleCtrlHandler's documentation), so
//     without it a container's process would ignore the CTRL_C_EVENT of a SIGINT. (Wine 8 also
//     skips a CTRL_BREAK_EVENT's handlers in a process that ignores CTRL+C: seen on the
//     emulated node, a HostProcess container's SIGTERM had no effect until this was done.)
func prepareConsoleControl() error {
	if ctrlReady {
		return nil
	}
	if err := setConsoleCtrlHandler(windows.NewCallback(func(uint32) uintptr { return 1 }), true); err != nil {
		return fmt.Errorf("install the shim's console control handler: %w", err)
	}
	if err := setConsoleCtrlHandler(0, false); err != nil {
		return fmt.Errorf("enable CTRL+C processing for the shim's children: %w", err)
	}
	ctrlReady = true
	return nil
}

// Signal delivers a console control event the documented way: the shim attaches to the
// process's console (AttachConsole) and generates the event for it (GenerateConsoleCtrlEvent
// with group 0: every process of that console). Windows generates only CTRL_C_EVENT and
// CTRL_BREAK_EVENT so; CtrlBreak, CtrlClose, CtrlLogOff and CtrlShutdown are delivered as
// CTRL_BREAK_EVENT (hcsshim delivers the others through kernel32's undocumented CtrlRoutine).
func (p *winProcess) Signal(_ context.Context, o *schema2.SignalProcessOptions) (bool, error) {
	event := uint32(windows.CTRL_BREAK_EVENT)
	if o != nil && o.Signal == schema2.SignalCtrlC {
		event = windows.CTRL_C_EVENT
	}
	select {
	case <-p.exited:
		return false, nil
	default:
	}
	ctrlMu.Lock()
	defer ctrlMu.Unlock()
	if err := prepareConsoleControl(); err != nil {
		return false, err
	}
	_ = freeConsole()
	if err := attachConsole(p.pid); err != nil {
		select {
		case <-p.exited:
			return false, nil
		default:
		}
		return false, fmt.Errorf("attach to the console of process %d: %w", p.pid, err)
	}
	defer freeConsole()
	if err := windows.GenerateConsoleCtrlEvent(event, 0); err != nil {
		return false, fmt.Errorf("console control event %d to process %d: %w", event, p.pid, err)
	}
	return true, nil
}

func (p *winProcess) ResizeConsole(_ context.Context, width, height uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pty == 0 {
		return fmt.Errorf("process %d has no pseudo console: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	return windows.ResizePseudoConsole(p.pty, windows.Coord{X: int16(width), Y: int16(height)})
}

func (p *winProcess) closeStdio() {
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Close releases the process's pipes and, once it exited (its waiter uses the handle until
// then), its handle; it does not end the process and does not wait for it.
func (p *winProcess) Close() error {
	p.closeOne.Do(func() {
		p.closeStdio()
		go func() {
			<-p.exited
			_ = windows.CloseHandle(p.h)
		}()
	})
	return nil
}

func pipe() (r, w windows.Handle, err error) {
	if err := windows.CreatePipe(&r, &w, inheritable(), 0); err != nil {
		return 0, 0, fmt.Errorf("create a pipe: %w", err)
	}
	return r, w, nil
}

func inheritable() *windows.SecurityAttributes {
	sa := &windows.SecurityAttributes{InheritHandle: 1}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	return sa
}

func orDefault(v, d uint16) uint16 {
	if v == 0 {
		return d
	}
	return v
}

// envBlock is a CREATE_UNICODE_ENVIRONMENT block: NAME=VALUE strings, each NUL-terminated,
// and a final NUL.
func envBlock(env []string) []uint16 {
	var b []uint16
	for _, kv := range env {
		b = append(b, utf16.Encode([]rune(kv))...)
		b = append(b, 0)
	}
	return append(b, 0)
}
