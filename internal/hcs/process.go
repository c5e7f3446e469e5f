package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Process is an open handle on a process in a compute system. It is safe for concurrent use.
type Process struct {
	api computecore.API
	sys *System
	pid uint32

	mu     sync.RWMutex // guards handle against Close; held only across the issuing call
	handle computecore.Process
	// released is set once the handle is closed: later notifications are dropped.
	released atomic.Bool

	stdin          io.WriteCloser
	stdout, stderr io.ReadCloser

	exitOnce sync.Once
	exited   chan struct{}
	exitCode int
	exitErr  error
}

// CreateProcess starts a process in the system. Its stdio, when p asked for pipes (or a
// console), is available from Stdio.
func (s *System) CreateProcess(ctx context.Context, params *schema2.ProcessParameters) (*Process, error) {
	const opName = "CreateProcess"
	doc, err := marshal(params)
	if err != nil {
		return nil, &Error{Op: opName, ID: s.id, Err: fmt.Errorf("encode process parameters: %w: %w", err, errdefs.ErrInvalidArgument)}
	}
	var h computecore.Process
	c := &call{client: s.client, api: s.api, op: opName, id: s.id, withInfo: true,
		start: func(op computecore.Operation) error {
			sh, release, err := s.acquire()
			if err != nil {
				return err
			}
			defer release()
			h, err = s.api.CreateProcess(sh, doc, op, 0)
			return err
		},
		abandon: func(info computecore.ProcessInformation, err error) {
			closeStdHandles(info)
			if err == nil {
				// Nobody will wait for or kill this process: do it now.
				p := &Process{api: s.api, sys: s, pid: info.ProcessID, handle: h, exited: make(chan struct{})}
				ctx, cancel := context.WithTimeout(context.Background(), orphanTimeout)
				defer cancel()
				if _, err := p.Kill(ctx); err != nil {
					log.G(ctx).WithFields(log.Fields{"system": s.id, "pid": info.ProcessID}).WithError(err).Warn("kill abandoned process")
				}
			}
			if h != 0 {
				s.api.CloseProcess(h)
			}
		},
	}
	_, info, err := c.run(ctx)
	if err != nil {
		if h != 0 && !isCtxErr(err) {
			s.api.CloseProcess(h)
		}
		return nil, err
	}
	p := &Process{api: s.api, sys: s, pid: info.ProcessID, handle: h, exited: make(chan struct{})}
	name := func(stream string) string { return fmt.Sprintf("%s/%d/%s", s.id, info.ProcessID, stream) }
	if info.StdInput != 0 {
		p.stdin = os.NewFile(info.StdInput, name("stdin"))
	}
	if info.StdOutput != 0 {
		p.stdout = os.NewFile(info.StdOutput, name("stdout"))
	}
	if info.StdError != 0 {
		p.stderr = os.NewFile(info.StdError, name("stderr"))
	}
	p.subscribe(ctx)
	return p, nil
}

// OpenProcess opens a process of the system by pid, for instance one created by another
// process. It has no stdio.
func (s *System) OpenProcess(ctx context.Context, pid uint32) (*Process, error) {
	const opName = "OpenProcess"
	sh, release, err := s.acquire()
	if err != nil {
		return nil, &Error{Op: opName, ID: s.id, Pid: pid, Err: err}
	}
	h, err := bounded(ctx, opName, s.id, func() (computecore.Process, error) {
		return s.api.OpenProcess(sh, pid, computecore.GenericAll)
	}, s.api.CloseProcess)
	release()
	if err != nil {
		s.client.dropIfDisconnected(s.api, err)
		if e, ok := err.(*Error); ok {
			e.Pid = pid
		}
		return nil, asError(err, opName, s.id, pid)
	}
	p := &Process{api: s.api, sys: s, pid: pid, handle: h, exited: make(chan struct{})}
	p.subscribe(ctx)
	return p, nil
}

// Pid returns the process id.
func (p *Process) Pid() uint32 { return p.pid }

// SystemID returns the id of the compute system the process runs in.
func (p *Process) SystemID() string { return p.sys.id }

// Stdio returns the process's stdio: nil for a stream that was not requested (and for every
// stream of an opened process). The caller owns them and closes them.
func (p *Process) Stdio() (stdin io.WriteCloser, stdout, stderr io.ReadCloser) {
	return p.stdin, p.stdout, p.stderr
}

func (p *Process) acquire() (computecore.Process, func(), error) {
	p.mu.RLock()
	if p.handle == 0 {
		p.mu.RUnlock()
		return 0, nil, ErrClosed
	}
	return p.handle, p.mu.RUnlock, nil
}

func (p *Process) processOp(ctx context.Context, opName string, f func(computecore.Process, computecore.Operation) error) (string, error) {
	c := &call{client: p.sys.client, api: p.api, op: opName, id: p.sys.id, pid: p.pid, start: func(op computecore.Operation) error {
		h, release, err := p.acquire()
		if err != nil {
			return err
		}
		defer release()
		return f(h, op)
	}}
	doc, _, err := c.run(ctx)
	return doc, err
}

// Signal sends a console control event. delivered is true when HCS delivered it; an error that
// errors.Is ErrProcessAlreadyStopped means the process had already exited.
func (p *Process) Signal(ctx context.Context, o *schema2.SignalProcessOptions) (delivered bool, err error) {
	const opName = "SignalProcess"
	doc, err := marshal(o)
	if err != nil {
		return false, &Error{Op: opName, ID: p.sys.id, Pid: p.pid, Err: fmt.Errorf("encode signal options: %w: %w", err, errdefs.ErrInvalidArgument)}
	}
	if _, err := p.processOp(ctx, opName, func(h computecore.Process, op computecore.Operation) error {
		return p.api.SignalProcess(h, op, doc)
	}); err != nil {
		return false, err
	}
	return true, nil
}

// Kill terminates the process (HcsTerminateProcess), with the same results as Signal.
func (p *Process) Kill(ctx context.Context) (delivered bool, err error) {
	if _, err := p.processOp(ctx, "TerminateProcess", func(h computecore.Process, op computecore.Operation) error {
		return p.api.TerminateProcess(h, op, "")
	}); err != nil {
		return false, err
	}
	return true, nil
}

// Exited is closed when the process exits (or its system does, or the service goes away).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitCode returns the exit code once Exited is closed, or an error when it is not known (the
// process has not exited, or HCS could not say).
func (p *Process) ExitCode() (int, error) {
	select {
	case <-p.exited:
		if p.exitErr != nil {
			return -1, p.exitErr
		}
		return p.exitCode, nil
	default:
		return -1, &Error{Op: "ExitCode", ID: p.sys.id, Pid: p.pid, Err: fmt.Errorf("process has not exited: %w", ErrInvalidState)}
	}
}

// ResizeConsole resizes the process's pseudo console.
func (p *Process) ResizeConsole(ctx context.Context, width, height uint16) error {
	return p.modify(ctx, &schema2.ProcessModifyRequest{
		Operation:   schema2.ModifyProcessConsoleSize,
		ConsoleSize: &schema2.ConsoleSize{Height: height, Width: width},
	})
}

// CloseStdin closes the process's end of its stdin, so it reads end of file.
func (p *Process) CloseStdin(ctx context.Context) error {
	return p.modify(ctx, &schema2.ProcessModifyRequest{
		Operation:   schema2.ModifyProcessCloseHandle,
		CloseHandle: &schema2.CloseHandle{Handle: schema2.StdHandleStdIn},
	})
}

func (p *Process) modify(ctx context.Context, req *schema2.ProcessModifyRequest) error {
	doc, _ := marshal(req)
	_, err := p.processOp(ctx, "ModifyProcess", func(h computecore.Process, op computecore.Operation) error {
		return p.api.ModifyProcess(h, op, doc)
	})
	return err
}

// Properties returns the process's status (exited, exit code).
func (p *Process) Properties(ctx context.Context) (*schema2.ProcessStatus, error) {
	const opName = "GetProcessProperties"
	doc, err := p.processOp(ctx, opName, func(h computecore.Process, op computecore.Operation) error {
		return p.api.GetProcessProperties(h, op, "")
	})
	if err != nil {
		return nil, err
	}
	var st schema2.ProcessStatus
	if err := json.Unmarshal([]byte(doc), &st); err != nil {
		return nil, &Error{Op: opName, ID: p.sys.id, Pid: p.pid, Err: fmt.Errorf("decode process status %.200q: %w", doc, err)}
	}
	return &st, nil
}

// Close releases the handle. The process keeps running; its stdio stays the caller's.
func (p *Process) Close() error {
	p.mu.Lock()
	h := p.handle
	p.handle = 0
	p.mu.Unlock()
	if h == 0 {
		return nil
	}
	p.sys.removeProcess(p)
	p.api.CloseProcess(h)
	p.released.Store(true)
	return nil
}

// subscribe registers for the process's notifications, then catches an exit that happened
// before the registration (a short-lived process, or an opened one that had already ended).
// As for System.subscribe, the callback is kept by computecore's registry.
func (p *Process) subscribe(ctx context.Context) {
	p.mu.Lock()
	h := p.handle
	p.mu.Unlock()
	p.sys.addProcess(p)
	onEvent := func(ev computecore.Event, _ uintptr) {
		if !p.released.Load() {
			p.onEvent(ev)
		}
	}
	if err := p.api.SetProcessCallback(h, computecore.EventOptionNone, 0, onEvent); err != nil {
		log.G(ctx).WithFields(log.Fields{"system": p.sys.id, "pid": p.pid}).WithError(err).Warn("SetProcessCallback failed; waiting for exit instead")
		go func() {
			doc, err := p.api.WaitForProcessExit(h, computecore.Infinite)
			if err != nil {
				p.markExited(-1, &Error{Op: "WaitForProcessExit", ID: p.sys.id, Pid: p.pid, Err: err, Detail: resultDetail(doc)})
				return
			}
			p.onExitData(doc)
		}()
		return
	}
	if st, err := p.Properties(ctx); err == nil && st.Exited {
		p.markExited(int(st.ExitCode), nil)
	}
}

func (p *Process) onEvent(ev computecore.Event) {
	switch ev.Type {
	case computecore.EventProcessExited:
		p.onExitData(ev.EventData)
	case computecore.EventServiceDisconnect:
		p.markExited(-1, &Error{Op: "ProcessExited", ID: p.sys.id, Pid: p.pid, Err: computecore.HCS_E_SERVICE_DISCONNECT, Detail: ev.EventData})
	default:
		log.L.WithFields(log.Fields{"system": p.sys.id, "pid": p.pid, "event": ev.Type.String()}).Debug("HCS process notification")
	}
}

// onExitData handles the {"Status":…,"ExitCode":…} document of a process exit. When Status is
// a failure, the exit code is not in it; it is read with GetProcessProperties.
func (p *Process) onExitData(doc string) {
	var d schema2.ProcessExitedEventData
	if err := json.Unmarshal([]byte(doc), &d); err == nil && d.Status == 0 {
		p.markExited(int(d.ExitCode), nil)
		return
	}
	go p.exitFromProperties(&Error{Op: "ProcessExited", ID: p.sys.id, Pid: p.pid,
		Err: computecore.HRESULT(uint32(d.Status)), Detail: "exit notification without an exit code: " + doc})
}

// exitFromProperties settles the exit from GetProcessProperties, or with fallback.
func (p *Process) exitFromProperties(fallback error) {
	ctx, cancel := context.WithTimeout(context.Background(), orphanTimeout)
	defer cancel()
	if st, err := p.Properties(ctx); err == nil && st.Exited {
		p.markExited(int(st.ExitCode), nil)
		return
	}
	p.markExited(-1, fallback)
}

// systemExited is called when the process's system exits: a process still running cannot
// outlive it, so settle its exit now.
func (p *Process) systemExited(sysErr error) {
	select {
	case <-p.exited:
		return
	default:
	}
	fallback := sysErr
	if fallback == nil {
		fallback = &Error{Op: "ProcessExited", ID: p.sys.id, Pid: p.pid, Err: computecore.HCS_E_SYSTEM_ALREADY_STOPPED, Detail: "the compute system exited before the process's exit was reported"}
	}
	p.exitFromProperties(fallback)
}

func (p *Process) markExited(code int, err error) {
	p.exitOnce.Do(func() {
		p.exitCode, p.exitErr = code, err
		close(p.exited)
		log.L.WithFields(log.Fields{"system": p.sys.id, "pid": p.pid, "exitCode": code}).WithError(err).Debug("process exited")
	})
}

// closeStdHandles closes the std handles of a process nobody will use.
func closeStdHandles(info computecore.ProcessInformation) {
	for _, h := range []uintptr{info.StdInput, info.StdOutput, info.StdError} {
		if h != 0 {
			_ = os.NewFile(h, "abandoned stdio").Close()
		}
	}
}
