package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/cgroup1"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/winargs"
	"github.com/openhcs/runhcs/internal/winlinux"
)

// defaultPath is the PATH of a process whose account's environment has none (the shim's
// environment without PATH).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environ is the account's default environment (what CreateEnvironmentBlock gives a token):
// the machine's PATH (the shim's, which is the host's) and the account's USERNAME and
// USERDOMAIN; nothing else of the shim's own environment.
func (t *linuxToken) environ() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path}
	if !t.inherit {
		env = append(env, "USERNAME="+t.acct.Name, "USERDOMAIN="+t.acct.Domain)
	}
	return env
}

// Start starts the process in the job: the command line split as CommandLineToArgvW does
// (internal/winargs), its program looked up as ProcessSpec says with Windows paths mapped to
// this machine's (localPath), its working folder mapped the same way, its environment the
// account's with the spec's over it and PATH as a Linux list with PathSuffix appended. It is
// forked by a thread that first enters the emulated host's network namespace and the job's
// groups, so that it is born there, with the machine's mount and PID namespaces, and joins the
// job's memory group right after. It runs as the token's identity, in a session of its own.
func (j *linuxJob) Start(_ context.Context, p *ProcessSpec) (_ Process, retErr error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	tok, ok := p.Token.(*linuxToken)
	if !ok || tok == nil {
		return nil, fmt.Errorf("start a process in job %s: no logon token: %w", JobName(j.id), errdefs.ErrInvalidArgument)
	}
	dir, err := localPath(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("start a process in job %s: working directory: %w", JobName(j.id), err)
	}
	env := mergeEnv(tok.environ(), p.Env)
	for i, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "PATH") {
			env[i] = k + "=" + pathList(v)
		}
	}
	var suffix []string
	for _, s := range p.PathSuffix {
		if l, err := localPath(s); err == nil {
			suffix = append(suffix, l)
		}
	}
	env = appendPath(env, suffix, ":")
	app, err := findApplication(p.CommandLine, dir, envValue(env, "PATH"), programPath)
	if err != nil {
		return nil, err
	}
	argv := winargs.Split(p.CommandLine)

	lp := &linuxProcess{exited: make(chan struct{})}
	var child [3]*os.File // the child's stdin, stdout, stderr; closed once it started
	defer func() {
		for _, f := range child {
			if f != nil {
				_ = f.Close()
			}
		}
		if retErr != nil {
			lp.closeStdio()
		}
	}()
	sys := &syscall.SysProcAttr{Setsid: true}
	if p.Terminal {
		master, slave, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("open a pseudo terminal: %w", err)
		}
		lp.console = master
		child = [3]*os.File{slave, nil, nil}
		if err := pty.Setsize(master, &pty.Winsize{Rows: orDefault(p.Height, 25), Cols: orDefault(p.Width, 80)}); err != nil {
			return nil, fmt.Errorf("size the pseudo terminal: %w", err)
		}
		out, err := dupFile(master)
		if err != nil {
			return nil, err
		}
		lp.stdin, lp.stdout = master, out
		sys.Setctty, sys.Ctty = true, 0
	} else {
		for i, want := range []bool{p.Stdin, p.Stdout, p.Stderr} {
			if !want {
				nul, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
				if err != nil {
					return nil, err
				}
				child[i] = nul
				continue
			}
			r, w, err := os.Pipe()
			if err != nil {
				return nil, fmt.Errorf("create a pipe: %w", err)
			}
			switch i {
			case 0:
				child[i], lp.stdin = r, w
			case 1:
				child[i], lp.stdout = w, r
			default:
				child[i], lp.stderr = w, r
			}
		}
	}
	files := []*os.File{child[0], child[1], child[2]}
	if p.Terminal {
		files = []*os.File{child[0], child[0], child[0]}
	}
	if !tok.inherit {
		tok.acct.SetCredential(sys)
	}
	proc, err := j.fork(app, argv, &os.ProcAttr{Dir: dir, Env: env, Files: files, Sys: sys})
	if err != nil {
		return nil, fmt.Errorf("create process %q in %q: %w", p.CommandLine, p.Dir, err)
	}
	lp.proc, lp.pid = proc, uint32(proc.Pid)
	go lp.wait()
	return lp, nil
}

// fork starts the process from a thread of its own that has entered the emulated host's
// network namespace and the job's groups (threadControllers): the child inherits both. Once the
// child exists the thread goes back to its own groups, as hcsemu's spawner thread does, so
// that the job never lists the shim (a cgroup v1 group's cgroup.procs names the process of
// any thread in it). The thread is never unlocked, so it ends with its goroutine and no other
// goroutine ever runs in its namespace. Pdeathsig is not set: it would fire when this thread
// ends.
//
// The child joins the job's memory group stopped at its exec (traced, as hcsemu's spawner
// starts a compute system's processes), before it runs an instruction of the program: a cgroup
// v1 memory group is charged only for the pages a task faults in while it is a member, so a
// process that joined once running had its start-up memory (a Go program's runtime and heap)
// charged to the shim's group, outside the job's limit and its stats (TestLinuxJob saw a job's
// memory usage of 0 bytes in about one run in eight). On Windows the shim creates the process
// suspended and assigns it to the job before it resumes it, so every commit is the job's.
func (j *linuxJob) fork(app string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	traced := *attr
	sys := syscall.SysProcAttr{}
	if attr.Sys != nil {
		sys = *attr.Sys
	}
	sys.Ptrace = true
	traced.Sys = &sys
	attr = &traced
	type result struct {
		p   *os.Process
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		tid := unix.Gettid()
		home, err := cgroup1.ProcCgroups(fmt.Sprintf("/proc/self/task/%d/cgroup", tid))
		if err != nil {
			ch <- result{err: fmt.Errorf("the shim's own groups: %w", err)}
			return
		}
		ns, err := os.Open(j.netns)
		if err != nil {
			ch <- result{err: fmt.Errorf("the emulated host's network namespace (hcsemu's --root from $%s): %w", layout.RootEnv, err)}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter the network namespace %s: %w", j.netns, err)}
			return
		}
		leave := func() error {
			var errs []error
			for _, c := range threadControllers {
				home := cgroup1.Group{Path: home[c]}
				errs = append(errs, home.Write(c, "tasks", strconv.Itoa(tid)))
			}
			return errors.Join(errs...)
		}
		for _, c := range threadControllers {
			if err := j.g.Write(c, "tasks", strconv.Itoa(tid)); err != nil {
				ch <- result{err: errors.Join(fmt.Errorf("enter job %s: %w", JobName(j.id), err), leave())}
				return
			}
		}
		p, err := os.StartProcess(app, argv, attr)
		if err != nil {
			ch <- result{err: errors.Join(err, leave())}
			return
		}
		if err := leave(); err != nil {
			_ = p.Kill()
			_ = unix.PtraceDetach(p.Pid)
			_, _ = p.Wait()
			ch <- result{err: fmt.Errorf("return the starting thread from job %s: %w", JobName(j.id), err)}
			return
		}
		// The tracer is this thread: only it may wait for the stop and detach.
		if err := j.joinMemoryAndResume(p); err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{p: p}
	}()
	r := <-ch
	return r.p, r.err
}

// joinMemoryAndResume moves p, stopped at its exec, into the job's memory group and lets it
// run (detached with no signal: the exec's SIGTRAP is discarded). A process that cannot join
// is killed and reaped: a process outside its job's limit is not what the caller asked for.
func (j *linuxJob) joinMemoryAndResume(p *os.Process) error {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(p.Pid, &ws, unix.WALL, nil); err != nil {
		_ = p.Kill()
		return fmt.Errorf("wait for process %d to stop at its start: %w", p.Pid, err)
	}
	if !ws.Stopped() {
		return fmt.Errorf("process %d ended before it started (wait status %#x)", p.Pid, uint32(ws))
	}
	if err := j.g.AddProcess(p.Pid, "memory"); err != nil {
		_ = p.Kill()
		_ = unix.PtraceDetach(p.Pid)
		_, _ = p.Wait()
		return fmt.Errorf("add process %d to job %s: %w", p.Pid, JobName(j.id), err)
	}
	if err := unix.PtraceDetach(p.Pid); err != nil {
		_ = p.Kill()
		_, _ = p.Wait()
		return fmt.Errorf("resume process %d: %w", p.Pid, err)
	}
	return nil
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func orDefault(v, d uint16) uint16 {
	if v == 0 {
		return d
	}
	return v
}

// linuxProcess is a process of a job.
type linuxProcess struct {
	proc    *os.Process
	pid     uint32
	console *os.File // the pseudo terminal's master, for resizes (also stdin)
	stdin   *os.File
	stdout  *os.File
	stderr  *os.File

	exited   chan struct{}
	mu       sync.Mutex // guards code, done
	code     uint32
	done     bool
	closeOne sync.Once
}

// wait reaps the process and records its Windows exit code (winlinux.ExitCode: a kill is 1,
// as TerminateJobObject's and TerminateProcess's here; SIGINT or SIGTERM, the console events'
// stand-ins, STATUS_CONTROL_C_EXIT).
func (p *linuxProcess) wait() {
	st, err := p.proc.Wait()
	code := uint32(winlinux.ExitCodeTerminated)
	if err == nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok {
			code = winlinux.ExitCode(ws)
		}
	}
	p.mu.Lock()
	p.code, p.done = code, true
	p.mu.Unlock()
	close(p.exited)
}

func (p *linuxProcess) Pid() uint32 { return p.pid }

func (p *linuxProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser) {
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

func (p *linuxProcess) Exited() <-chan struct{} { return p.exited }

func (p *linuxProcess) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		return -1, fmt.Errorf("process %d has not exited: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	return int(p.code), nil
}

func (p *linuxProcess) isExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process has exited (then nothing is delivered).
func (p *linuxProcess) signal(sig syscall.Signal) (bool, error) {
	if p.isExited() {
		return false, nil
	}
	if err := p.proc.Signal(sig); err != nil {
		if p.isExited() || errors.Is(err, os.ErrProcessDone) {
			return false, nil
		}
		return false, fmt.Errorf("signal %v to process %d: %w", sig, p.pid, err)
	}
	return true, nil
}

// Kill terminates the process (SIGKILL: exit code 1, as TerminateProcess's here).
func (p *linuxProcess) Kill(context.Context) (bool, error) { return p.signal(syscall.SIGKILL) }

// Signal delivers a console control event as the signal that stands for it, the rule hcsemu
// applies to its containers' processes (winlinux.ConsoleSignal: CtrlC is SIGINT, the others
// SIGTERM); no options is CtrlBreak's, as on Windows.
func (p *linuxProcess) Signal(_ context.Context, o *schema2.SignalProcessOptions) (bool, error) {
	ev := schema2.SignalCtrlBreak
	if o != nil && o.Signal != "" {
		ev = o.Signal
	}
	return p.signal(winlinux.ConsoleSignal(ev))
}

func (p *linuxProcess) ResizeConsole(_ context.Context, width, height uint16) error {
	if p.console == nil {
		return fmt.Errorf("process %d has no pseudo console: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	if p.isExited() {
		return nil
	}
	return pty.Setsize(p.console, &pty.Winsize{Rows: height, Cols: width})
}

func (p *linuxProcess) closeStdio() {
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Close releases the process's pipes; it does not end the process and does not wait for it.
func (p *linuxProcess) Close() error {
	p.closeOne.Do(func() {
		p.closeStdio()
		if p.proc != nil {
			go func() {
				<-p.exited
				_ = p.proc.Release()
			}()
		}
	})
	return nil
}
