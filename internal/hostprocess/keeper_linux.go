package hostprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/cgroup1"
)

// A job's keeper makes the Linux job end with the process that created it, as a job object
// created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE ends its processes when its last handle
// closes, which the kernel does when the shim dies however it dies (SIGKILL included). A
// cgroup has no such tie to a process, so CreateJob starts one: this program re-executed
// (/proc/self/exe, which names the running binary even if the file was replaced since) with
// argv[0] KeeperName, in a session of its own (a signal to the shim's process group does not
// reach it), in the shim's groups and not the job's (so freezing and killing the job never
// touches it), with its working folder at / and stdio on /dev/null (it holds none of the
// shim's pipes, which containerd waits on, and no bundle folder busy). It holds the read end of
// a pipe whose write end only the creating process holds: the pipe is made with O_CLOEXEC, so
// no process the shim starts inherits it, and kept as a raw descriptor rather than an *os.File,
// so no finalizer closes it when a Job is dropped without Close (a leaked job handle stays
// open on Windows too).
//
// The keeper's read returns either a byte (keeperDone: Close ended the job itself) or EOF: the
// creator died (or closed the descriptor without the byte); then, and only then, the keeper
// ends the group (endGroup: kill, wait, remove) and exits.
//
// Close and the keeper do not race: Close ends the group first and writes keeperDone after,
// while the write end is still open, so while the creator lives the keeper is blocked in its
// read and does nothing; it acts only if the creator died before the byte was written
// (perhaps in the middle of Close's endGroup, which the keeper then finishes: endGroup
// treats what is already gone as done). The delete action containerd runs after a dead shim
// (TerminateJob) may run endGroup at the same time as the keeper; that is safe for the same
// reason (both freeze and SIGKILL everything, remove what is left, ignore what is gone).
//
// A keeper acts only on the group it was made for: CreateJob passes the identity (device and
// inode) of the job's freezer folder, and the keeper compares it before acting. A delete
// action may have removed the group and a new job of the same name (the same container id)
// been created since; that new job's group is another folder with another inode (kernfs
// allocates inode numbers cyclically, and on 64-bit systems they carry a generation in their
// high bits, so a number is not reused for a new group), and the old keeper leaves it alone.
// The check and the kill are not one step: a group removed and made again between them would
// be ended by the old keeper. That needs the old job's removal and a new task of the same id
// (which containerd creates only after the old one's delete action returned) to fall within
// those microseconds; accepted.

// KeeperName is the keeper's argv[0], by which Reexec knows it (and ps shows it).
const KeeperName = "runhcs-hostprocess-keeper"

// keeperDone is what Close writes to tell the keeper the job is ended and it must not act.
const keeperDone = 'd'

// keeperPipeFd is the keeper's descriptor of the pipe's read end (the first of ExtraFiles).
const keeperPipeFd = 3

// reexecCalled records that Reexec ran in this process, so that CreateJob knows a keeper it
// starts from this binary becomes a keeper rather than a second shim.
var reexecCalled atomic.Bool

// Reexec runs the job keeper and exits if this process is one (argv[0] is KeeperName), and
// returns otherwise. A program that creates jobs calls it first thing in main (the shim's
// internal/shim Run, this package's TestMain), before anything else of the program runs in a
// keeper; CreateJob refuses to run in a program that did not.
func Reexec() {
	reexecCalled.Store(true)
	if len(os.Args) == 0 || os.Args[0] != KeeperName {
		return
	}
	if err := runKeeper(os.Args[1:]); err != nil {
		// stderr is /dev/null under the shim; the message is for a person who runs it by hand.
		fmt.Fprintf(os.Stderr, "%s: %v\n", KeeperName, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// keeper is the creator's side of a job's keeper: the pipe's write end and the keeper's end.
type keeper struct {
	w      int           // the pipe's write end (raw: see above)
	pid    int           // the keeper's process
	exited chan struct{} // closed once the keeper exited and was reaped
}

// startKeeper starts the keeper of group g, which must exist.
func startKeeper(g cgroup1.Group) (*keeper, error) {
	var st unix.Stat_t
	if err := unix.Stat(g.Dir("freezer"), &st); err != nil {
		return nil, fmt.Errorf("start the keeper of cgroup %s: %w", g.Path, err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("start the keeper of cgroup %s: pipe: %w", g.Path, err)
	}
	r := os.NewFile(uintptr(p[0]), "keeper pipe")
	defer r.Close() // the keeper has its copy; the creator holds only the write end
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{KeeperName, g.Path, strconv.FormatUint(st.Dev, 10), strconv.FormatUint(st.Ino, 10)},
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		_ = unix.Close(p[1])
		return nil, fmt.Errorf("start the keeper of cgroup %s: %w", g.Path, err)
	}
	k := &keeper{w: p[1], pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		// The shim runs without a reaper (internal/shim Run), so its children are its own to wait
		// for.
		_ = cmd.Wait()
		close(k.exited)
	}()
	return k, nil
}

// release tells the keeper the job is ended (keeperDone), closes the write end and waits,
// briefly, for the keeper to exit, so that none outlives a closed job.
func (k *keeper) release() {
	// EPIPE if the keeper is gone (killed by hand): nothing to tell it then. Go ignores the
	// SIGPIPE of a write to a descriptor other than stdout and stderr.
	_, _ = unix.Write(k.w, []byte{keeperDone})
	_ = unix.Close(k.w)
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
	}
}

// runKeeper is the keeper: args are the job's group (its path under each controller) and the
// device and inode its freezer folder had when the job was created.
func runKeeper(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want the arguments <cgroup path> <device> <inode>, got %q: %w", args, errdefs.ErrInvalidArgument)
	}
	path := args[0]
	// The keeper runs as root and ends what the path names: only a job's group, never a folder
	// above or beside the jobs'.
	if filepath.Dir(path) != JobCgroupFolder || filepath.Clean(path) != path {
		return fmt.Errorf("cgroup %q is not a job's (%s/<name>): %w", path, JobCgroupFolder, errdefs.ErrInvalidArgument)
	}
	dev, err1 := strconv.ParseUint(args[1], 10, 64)
	ino, err2 := strconv.ParseUint(args[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("the identity of cgroup %s: %w", path, err)
	}
	// No signal a person sends a terminal's or a session's processes (the shim's session
	// ending, Ctrl-C where it was started by hand) ends a keeper; SIGTERM and SIGKILL do.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	b := make([]byte, 1)
	for {
		n, err := unix.Read(keeperPipeFd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the pipe of cgroup %s's creator: %w", path, err)
		}
		if n > 0 {
			return nil // keeperDone: Close ended the job
		}
		break // EOF: the creator is gone
	}
	g := cgroup1.Group{Path: path}
	var st unix.Stat_t
	if err := unix.Stat(g.Dir("freezer"), &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // ended already (a delete action, or Close before the creator died)
		}
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	if st.Dev != dev || st.Ino != ino {
		return nil // a new job of the same name: not this keeper's
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return endGroup(ctx, g)
}
