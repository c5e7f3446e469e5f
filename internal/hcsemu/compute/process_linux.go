package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/log"
	"github.com/creack/pty"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/winlinux"
)

// Exit codes a Windows process gets when it did not choose one (internal/winlinux).
const (
	exitCodeTerminated = winlinux.ExitCodeTerminated
	exitCodeCtrlC      = winlinux.ExitCodeCtrlC
)

// maxExitedProcesses bounds how many exited processes a system remembers for OpenProcess and
// GetProcessProperties once nobody holds them.
const maxExitedProcesses = 256

// process is one process of a system; its fields are guarded by the system's lock.
type process struct {
	s       *system
	pid     uint32
	osp     *os.Process
	image   string // the Windows path of the program
	created time.Time
	exited  chan struct{}
	code    uint32
	refs    map[Subscriber]int

	console     *os.File    // the pseudo console master, kept for resizes
	stdinRelay  *os.File    // the write end of the process's stdin (the daemon side)
	stdinClient *os.File    // the read end of the pipe whose write end the client holds
	closeStdin  sync.Once   // closes the relay
	stdinEnd    atomic.Bool // CloseHandle(StdIn) asked the relay to finish
	killedBy    syscall.Signal
}

// The size of a pseudo console created without ConsoleSize, as HCS makes it.
const defaultConsoleRows, defaultConsoleCols = 25, 80

func (p *process) isExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *process) exitDoc() string {
	b, _ := json.Marshal(schema2.ProcessExitedEventData{Status: 0, ExitCode: p.code})
	return string(b)
}

func (p *process) reply() wire.ProcessReply {
	r := wire.ProcessReply{PID: p.pid}
	if p.isExited() {
		r.Exited, r.ExitStatus = true, p.exitDoc()
	}
	return r
}

// signalFor maps a console control event to the signal that stands for it on Linux
// (winlinux.ConsoleSignal: CtrlC is SIGINT, the others SIGTERM).
func signalFor(sig schema2.ProcessSignal) syscall.Signal { return winlinux.ConsoleSignal(sig) }

func (p *process) signalLocked(sig syscall.Signal) error {
	if p.isExited() {
		return hresult.Errorf(computecore.HCS_E_PROCESS_ALREADY_STOPPED, "process %d in compute system %q has already exited", p.pid, p.s.id)
	}
	p.killedBy = sig
	if err := p.osp.Signal(sig); err != nil {
		return hresult.Errorf(computecore.HCS_E_PROCESS_ALREADY_STOPPED, "signal process %d in compute system %q: %v", p.pid, p.s.id, err)
	}
	return nil
}

func (p *process) closeStdinRelay() {
	p.closeStdin.Do(func() {
		if p.stdinRelay != nil {
			p.stdinRelay.Close()
		}
		if p.stdinClient != nil {
			p.stdinClient.Close()
		}
	})
}

// CreateProcess starts a process in a running container: the command line parsed as
// CommandLineToArgvW does, the program found as CreateProcess finds it, chrooted in the
// container's volume (its C:\) with the given environment and working directory. It returns
// the descriptors to hand to the caller, in slot order; the caller closes them once sent.
func (e *Engine) CreateProcess(ctx context.Context, ref wire.SystemRef, doc string, sub Subscriber) (wire.ProcessReply, []*os.File, error) {
	params, err := ValidateProcessParameters(doc)
	if err != nil {
		return wire.ProcessReply{}, nil, err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return wire.ProcessReply{}, nil, err
	}
	defer s.mu.Unlock()
	if s.vm != nil && !allowed(s.state, opCreateProcess) {
		return wire.ProcessReply{}, nil, hresult.Errorf(computecore.HCS_E_INVALID_STATE, "CreateProcess in VM %q: not valid in state %s", s.id, s.state)
	}
	if s.vm != nil && !s.vm.guest {
		// HCS creates processes in a utility VM through its guest connection; without one
		// "the request is not supported" (microsoft/hcsshim#1327).
		return wire.ProcessReply{}, nil, hresult.Errorf(computecore.E_NOT_SUPPORTED, "CreateProcess in VM %q: the VM has no GuestConnection", s.id)
	}
	if s.vol == nil {
		return wire.ProcessReply{}, nil, hresult.Errorf(computecore.E_NOT_SUPPORTED, "compute system %q has no container storage to run a process in", s.id)
	}
	if !allowed(s.state, opCreateProcess) {
		return wire.ProcessReply{}, nil, hresult.Errorf(computecore.HCS_E_INVALID_STATE, "CreateProcess in compute system %q: not valid in state %s", s.id, s.state)
	}
	p, files, err := s.startLocked(ctx, params)
	if err != nil {
		return wire.ProcessReply{}, nil, err
	}
	p.refs[sub]++
	r := p.reply()
	r.Console = p.console != nil
	r.Stdio = [3]bool{params.CreateStdInPipe || r.Console, params.CreateStdOutPipe || r.Console, params.CreateStdErrPipe && !r.Console}
	return r, files, nil
}

func (s *system) startLocked(ctx context.Context, params *schema2.ProcessParameters) (_ *process, send []*os.File, retErr error) {
	var argv []string
	if params.CommandLine != "" {
		argv = ParseCommandLine(params.CommandLine)
	} else {
		argv = slices.Clone(params.CommandArgs)
	}
	program := params.ApplicationName
	if program == "" && len(argv) > 0 {
		program = argv[0]
	}
	if len(argv) == 0 {
		argv = []string{program}
	}
	workDir := params.WorkingDirectory
	if workDir == "" {
		workDir = `C:\`
	}
	cwd, err := s.vol.resolveDir(workDir)
	if err != nil {
		return nil, nil, fmt.Errorf("WorkingDirectory: %w", err)
	}
	exe, err := s.vol.resolveExecutable(program, workDir, params.Environment)
	if err != nil {
		return nil, nil, err
	}
	acct, err := lookupAccount(params.User)
	if err != nil {
		return nil, nil, err
	}
	if err := s.vol.createProfile(acct); err != nil {
		return nil, nil, hresult.Errorf(computecore.E_FAIL, "create the profile of %s\\%s in compute system %q: %v", acct.Domain, acct.Name, s.id, err)
	}
	// The account's environment first, the caller's over it: Windows merges the Environment
	// given to CreateProcess over the user's block the same way (hcsshim passes only the spec's
	// variables, and a workload still sees USERNAME; Kubernetes' runAsUserName documentation
	// shows it).
	envMap := acct.environment()
	if s.identity != nil {
		s.identity.addTo(envMap)
	}
	for k, v := range params.Environment {
		envMap[k] = v
	}
	env := make([]string, 0, len(envMap))
	for k, v := range envMap {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)

	var (
		childFiles [3]*os.File // what the child gets as fds 0, 1, 2
		closeAfter []*os.File  // the daemon's copies of the child's ends
		p          = &process{s: s, exited: make(chan struct{}), refs: map[Subscriber]int{}, image: exe.WindowsPath}
	)
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
		if retErr != nil {
			for _, f := range send {
				f.Close()
			}
			send = nil
			if p.console != nil {
				p.console.Close()
			}
			p.closeStdinRelay()
		}
	}()
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, hresult.Errorf(computecore.E_FAIL, "open %s: %v", os.DevNull, err)
	}
	closeAfter = append(closeAfter, devNull)
	childFiles = [3]*os.File{devNull, devNull, devNull}
	sys := &syscall.SysProcAttr{
		Chroot:    s.volPath,
		Pdeathsig: syscall.SIGKILL, // see spawner: the daemon's death ends its processes
	}
	acct.setCredential(sys)
	var pidns *os.File
	if s.silo != nil {
		pidns = s.silo.pid
	}
	if s.vmNamespacesLocked() != nil || pidns != nil {
		// In a VM's or a silo's PID namespace the parent is outside it and getppid() is 0,
		// which Go's fork takes for a dead parent and answers with Pdeathsig at once. The VM
		// init or silo init has Pdeathsig instead, and its death kills everything in the
		// namespace (vminit_linux.go, silo_linux.go).
		sys.Pdeathsig = 0
	}
	if params.EmulateConsole {
		master, tty, err := pty.Open()
		if err != nil {
			return nil, nil, hresult.Errorf(computecore.E_FAIL, "open a pseudo console: %v", err)
		}
		p.console = master
		closeAfter = append(closeAfter, tty)
		h, w := params.ConsoleSize[0], params.ConsoleSize[1]
		if h == 0 || w == 0 {
			// No size: HCS (and cexecsvc) give the pseudo console 80 columns by 25 rows
			// (hcsshim PR #1326 took that default for host process containers "to match what
			// cexecsvc/hcs sets"). containerd's CRI never sets one for an exec; the first
			// resize comes after the start. Assumption: a size with one zero is no size.
			h, w = defaultConsoleRows, defaultConsoleCols
		}
		pty.Setsize(master, &pty.Winsize{Rows: h, Cols: w})
		childFiles = [3]*os.File{tty, tty, tty}
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
		dup, err := dupFile(master)
		if err != nil {
			return nil, nil, hresult.Errorf(computecore.E_FAIL, "duplicate the pseudo console: %v", err)
		}
		send = append(send, dup)
	} else {
		// Its own process group, so that signals meant for the daemon's group do not reach it.
		sys.Setpgid = true
		if params.CreateStdInPipe {
			// Two pipes and a relay: the client writes into one, the daemon copies into the
			// other, so that CloseHandle(StdIn) can end the process's input while the client
			// still holds its end, as closing HCS's side of the stdin pipe does.
			cr, cw, err := os.Pipe()
			if err != nil {
				return nil, nil, hresult.Errorf(computecore.E_FAIL, "create stdin pipe: %v", err)
			}
			pr, pw, err := os.Pipe()
			if err != nil {
				cr.Close()
				cw.Close()
				return nil, nil, hresult.Errorf(computecore.E_FAIL, "create stdin pipe: %v", err)
			}
			send = append(send, cw)
			p.stdinClient, p.stdinRelay = cr, pw
			childFiles[0] = pr
			closeAfter = append(closeAfter, pr)
		}
		for i, want := range []bool{params.CreateStdOutPipe, params.CreateStdErrPipe} {
			if !want {
				continue
			}
			r, w, err := os.Pipe()
			if err != nil {
				return nil, nil, hresult.Errorf(computecore.E_FAIL, "create std pipe: %v", err)
			}
			send = append(send, r)
			childFiles[i+1] = w
			closeAfter = append(closeAfter, w)
		}
	}

	attr := &os.ProcAttr{Dir: cwd, Env: env, Files: childFiles[:], Sys: sys}
	vmns := s.vmNamespacesLocked()
	// A container's processes, process-isolated or hosted in a utility VM, see the HostName
	// of its document as the computer's name: each container in a VM is a silo of its own
	// there (hcsshim's hcsoci sets GuestOs.HostName from the spec's hostname for both). The
	// VM's own processes (no Container: shimdiag exec) see the VM's name.
	hostname := ""
	if c := s.doc.Container; c != nil && c.GuestOs != nil {
		hostname = c.GuestOs.HostName
	}
	osp, err := s.e.sp.spawnAs(s.cg, s.netns, vmns, pidns, hostname, exe.LinuxPath, argv, attr)
	if err != nil {
		return nil, nil, hresult.Errorf(startErrorHRESULT(err), "start %q (%s) in compute system %q: %v", program, exe.WindowsPath, s.id, err)
	}
	p.osp, p.pid, p.created = osp, uint32(osp.Pid), time.Now()
	s.procs[p.pid] = p
	s.everRan = true
	if p.stdinRelay != nil {
		go p.relayStdin()
	}
	go s.wait(p)
	log.G(ctx).WithFields(log.Fields{"system": s.id, "pid": p.pid, "program": exe.WindowsPath}).Info("hcsemu: process started")
	return p, send, nil
}

// relayStdin copies what the client writes to the process's stdin until the client closes its
// end, the process goes away, or CloseHandle(StdIn) asks it to stop. In the last case what the
// client wrote before asking is still delivered: the blocked read is woken with a deadline (which
// consumes nothing), and what is left in the pipe is drained before the process's end is closed.
func (p *process) relayStdin() {
	defer p.closeStdinRelay()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.stdinClient.Read(buf)
		if n > 0 {
			if _, werr := p.stdinRelay.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err == nil {
			continue
		}
		if p.stdinEnd.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			p.drainStdin(buf)
		}
		return
	}
}

// drainStdin writes out what is already in the client's pipe, without waiting for more.
func (p *process) drainStdin(buf []byte) {
	rc, err := p.stdinClient.SyscallConn()
	if err != nil {
		return
	}
	var pending [][]byte
	rc.Control(func(fd uintptr) {
		for {
			n, err := syscall.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return
			}
			pending = append(pending, append([]byte(nil), buf[:n]...))
		}
	})
	for _, b := range pending {
		if _, err := p.stdinRelay.Write(b); err != nil {
			return
		}
	}
}

// endStdin is CloseHandle(StdIn): the process reads end-of-file once what was written is read.
func (p *process) endStdin() {
	if p.stdinClient == nil {
		return
	}
	p.stdinEnd.Store(true)
	if err := p.stdinClient.SetReadDeadline(time.Now()); err != nil {
		p.closeStdinRelay() // not pollable: nothing better than closing at once
	}
}

// startErrorHRESULT maps why exec failed to what CreateProcess would return.
func startErrorHRESULT(err error) computecore.HRESULT {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return computecore.E_FILE_NOT_FOUND
	case errors.Is(err, syscall.ENOEXEC):
		return computecore.E_BAD_EXE_FORMAT
	case errors.Is(err, fs.ErrPermission):
		return computecore.E_ACCESSDENIED
	}
	return computecore.E_FAIL
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// wait reaps a process, tells its holders, and stops a container whose last process it was.
func (s *system) wait(p *process) {
	st, err := p.osp.Wait()
	code := uint32(exitCodeTerminated)
	if err == nil {
		ws, _ := st.Sys().(syscall.WaitStatus)
		code = winlinux.ExitCode(ws)
	}
	p.closeStdinRelay()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.console != nil {
		p.console.Close()
		p.console = nil
	}
	p.code = code
	close(p.exited)
	s.exitOrder = append(s.exitOrder, p.pid)
	ev := wire.Event{Type: computecore.EventProcessExited, System: s.ref(), PID: p.pid, Data: p.exitDoc()}
	for sub := range p.refs {
		sub.Notify(ev)
	}
	log.L.WithFields(log.Fields{"system": s.id, "pid": p.pid, "exitCode": code}).Info("hcsemu: process exited")
	// HCS ends a silo with its last process (a container's system exits when its init process
	// and everything it started are gone); a system that never ran a process stays up.
	if s.typ == schema2.SystemTypeContainer && s.everRan && s.state == schema2.StateRunning && len(s.liveLocked()) == 0 {
		s.stopLocked(context.Background(), s.siloExitTypeLocked())
	}
	s.pruneLocked()
}

// pruneLocked forgets the oldest exited processes nobody holds, beyond maxExitedProcesses.
func (s *system) pruneLocked() {
	for len(s.exitOrder) > maxExitedProcesses {
		pid := s.exitOrder[0]
		if p, ok := s.procs[pid]; ok && len(p.refs) > 0 {
			break
		}
		s.exitOrder = s.exitOrder[1:]
		delete(s.procs, pid)
	}
}

// lookupProcess returns the process ref names, with its system locked. Callers unlock it.
func (e *Engine) lookupProcess(ref wire.ProcessRef) (*system, *process, error) {
	s, err := e.lookup(ref.System)
	if err != nil {
		return nil, nil, err
	}
	p, ok := s.procs[ref.PID]
	if !ok {
		s.mu.Unlock()
		return nil, nil, hresult.Errorf(computecore.E_ELEMENT_NOT_FOUND, "process %d not found in compute system %q", ref.PID, ref.System.ID)
	}
	return s, p, nil
}

// OpenProcess gives sub a handle on a process of a system.
func (e *Engine) OpenProcess(ctx context.Context, ref wire.ProcessRef, sub Subscriber) (wire.ProcessReply, error) {
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return wire.ProcessReply{}, err
	}
	defer s.mu.Unlock()
	p.refs[sub]++
	return p.reply(), nil
}

// CloseProcess drops one of sub's handles on a process.
func (e *Engine) CloseProcess(ctx context.Context, ref wire.ProcessRef, sub Subscriber) {
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return
	}
	defer s.mu.Unlock()
	if p.refs[sub]--; p.refs[sub] <= 0 {
		delete(p.refs, sub)
	}
	s.pruneLocked()
}

// SignalProcess delivers a console control event (SignalProcessOptions).
func (e *Engine) SignalProcess(ctx context.Context, ref wire.ProcessRef, doc string) error {
	var o schema2.SignalProcessOptions
	if err := hresult.Decode(doc, &o, "SignalProcessOptions"); err != nil {
		return err
	}
	switch o.Signal {
	case schema2.SignalCtrlC, schema2.SignalCtrlBreak, schema2.SignalCtrlClose, schema2.SignalCtrlLogOff, schema2.SignalCtrlShutdown:
	case "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Signal: missing required field")
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "Signal: %q is not a console control event", o.Signal)
	}
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return p.signalLocked(signalFor(o.Signal))
}

// TerminateProcess kills a process (SIGKILL).
func (e *Engine) TerminateProcess(ctx context.Context, ref wire.ProcessRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "terminate options"); err != nil {
		return err
	}
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	return p.signalLocked(syscall.SIGKILL)
}

// ProcessProperties answers HcsGetProcessProperties with a ProcessStatus.
func (e *Engine) ProcessProperties(ctx context.Context, ref wire.ProcessRef, query string) (string, error) {
	var q schema2.PropertyQuery
	if err := hresult.DecodeOptional(query, &q, "PropertyQuery"); err != nil {
		return "", err
	}
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	st := schema2.ProcessStatus{ProcessId: p.pid, Exited: p.isExited()}
	if st.Exited {
		st.ExitCode = p.code
	}
	b, err := json.Marshal(st)
	return string(b), err
}

// ModifyProcess resizes the pseudo console or closes the process's stdin.
func (e *Engine) ModifyProcess(ctx context.Context, ref wire.ProcessRef, doc string) error {
	var req schema2.ProcessModifyRequest
	if err := hresult.Decode(doc, &req, "ProcessModifyRequest"); err != nil {
		return err
	}
	s, p, err := e.lookupProcess(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	switch req.Operation {
	case schema2.ModifyProcessConsoleSize:
		if req.ConsoleSize == nil {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "ConsoleSize: missing required field")
		}
		if p.isExited() {
			return hresult.Errorf(computecore.HCS_E_PROCESS_ALREADY_STOPPED, "resize the console of process %d in compute system %q: it has exited", p.pid, s.id)
		}
		if p.console == nil {
			return hresult.Errorf(computecore.E_INVALIDARG, "ConsoleSize: process %d in compute system %q has no console", p.pid, s.id)
		}
		if err := pty.Setsize(p.console, &pty.Winsize{Rows: req.ConsoleSize.Height, Cols: req.ConsoleSize.Width}); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "resize the console of process %d: %v", p.pid, err)
		}
	case schema2.ModifyProcessCloseHandle:
		if req.CloseHandle == nil {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "CloseHandle: missing required field")
		}
		switch req.CloseHandle.Handle {
		case schema2.StdHandleStdIn, schema2.StdHandleAll:
			if p.console != nil {
				// A console has no separate input to close: end-of-file is ^D (VEOF) at the
				// start of a line, which is what closing a console's input means to a
				// program reading it.
				p.console.Write([]byte{4})
			}
			p.endStdin()
		case schema2.StdHandleStdOut, schema2.StdHandleStdErr:
			// The daemon keeps no side of the output pipes: the caller's own ends are the
			// only ones, and closing them is the caller's.
		default:
			return hresult.Errorf(computecore.E_INVALIDARG, "CloseHandle.Handle: %q is not StdIn, StdOut, StdErr or All", req.CloseHandle.Handle)
		}
	case "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Operation: missing required field")
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "Operation: %q is not ConsoleSize or CloseHandle", req.Operation)
	}
	return nil
}

// processListLocked lists every process in the system's cgroups with details from /proc.
func (s *system) processListLocked() []schema2.ProcessDetails {
	if s.cg == nil || s.state == schema2.StateStopped {
		return []schema2.ProcessDetails{}
	}
	out := []schema2.ProcessDetails{}
	for _, pid := range s.cg.pids() {
		d, err := procDetails(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if p, ok := s.procs[uint32(pid)]; ok {
			d.ImageName = path.Base(strings.ReplaceAll(p.image, `\`, "/"))
		}
		out = append(out, d)
	}
	return out
}

const (
	clockTicks = 100 // USER_HZ, the unit of /proc/<pid>/stat times
	pageSize   = 4096
)

var bootTime = sync.OnceValue(func() time.Time {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0)
		}
	}
	return time.Time{}
})

// procDetails reads /proc/<pid>/stat (proc(5)): comm, utime (14), stime (15), starttime (22),
// vsize (23), rss (24).
func procDetails(pid int) (schema2.ProcessDetails, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return schema2.ProcessDetails{}, err
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return schema2.ProcessDetails{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[close+1:]) // fields[0] is field 3 (state)
	num := func(field int) uint64 {
		i := field - 3
		if i < 0 || i >= len(fields) {
			return 0
		}
		n, _ := strconv.ParseUint(fields[i], 10, 64)
		return n
	}
	const per100ns = 10_000_000 / clockTicks
	return schema2.ProcessDetails{
		ProcessId:                    uint32(pid),
		ImageName:                    s[open+1 : close],
		CreateTimestamp:              bootTime().Add(time.Duration(num(22)) * time.Second / clockTicks),
		UserTime100ns:                num(14) * per100ns,
		KernelTime100ns:              num(15) * per100ns,
		MemoryCommitBytes:            num(23),
		MemoryWorkingSetPrivateBytes: num(24) * pageSize,
	}, nil
}
