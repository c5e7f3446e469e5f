package compute

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/layout"
)

// The "VM init": the process that is a utility VM's kernel, as far as Linux can tell. hcsemu
// starts it by re-executing itself (/proc/self/exe) with vmInitEnv set (the binary's
// explicit Reexec call, reexec_linux.go, then runs runVMInit), in new PID, mount, UTS
// and IPC namespaces and in the VM's cgroup; it is PID 1 of the VM. It makes its mounts slaves
// of the daemon's (so the guest mounts the daemon makes under <root>/vms appear in it, while
// nothing mounted inside reaches the host), mounts the VM's own procfs at C:\proc of the
// guest, sets the VM's host name, says it is ready on fd 3, and then reaps orphans until it is
// killed. When it dies, the kernel kills every process of its PID namespace: everything in the
// VM, hosted containers included.

const (
	vmInitEnv     = layout.VMInitEnv     // set (to the VM's host name) in the VM init's environment
	vmInitRootEnv = layout.VMInitRootEnv // the guest's C:\ (a path the daemon mounted)
)

func runVMInit(hostname, root string) int {
	ready := os.NewFile(3, "ready")
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		if ready != nil {
			fmt.Fprintf(ready, "error: %s\n", msg)
			ready.Close()
		}
		fmt.Fprintln(os.Stderr, "hcsemu vm init:", msg)
		return 1
	}
	if os.Getpid() != 1 {
		return fail("not PID 1 of a new PID namespace (pid %d)", os.Getpid())
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fail("make the mounts slaves: %v", err)
	}
	if root != "" {
		proc := filepath.Join(root, "proc")
		if err := os.MkdirAll(proc, 0o555); err != nil {
			return fail("create %s: %v", proc, err)
		}
		if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fail("mount the VM's procfs at %s: %v", proc, err)
		}
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fail("set the host name %q: %v", hostname, err)
	}
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	fmt.Fprintln(ready, "ready")
	ready.Close()
	for range children {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}

// vmHostname is the UTS name of a VM: its id, cut to the kernel's 64 bytes and stripped of what a
// host name cannot hold.
func vmHostname(id string) string {
	var b strings.Builder
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() == 63 {
			break
		}
	}
	if b.Len() == 0 {
		return "vm"
	}
	return b.String()
}

// vmNamespaces are a running VM's namespaces, opened from its init. The spawner enters them
// (spawn_linux.go) to start a process in the VM. mu guards against closing them while a
// spawn uses them.
type vmNamespaces struct {
	mu     sync.RWMutex
	closed bool
	// files by the setns flag, in the order the spawner enters them.
	pid, mnt, uts, ipc *os.File
}

func openVMNamespaces(pid int) (*vmNamespaces, error) {
	ns := &vmNamespaces{}
	for _, x := range []struct {
		name string
		f    **os.File
	}{{"pid", &ns.pid}, {"mnt", &ns.mnt}, {"uts", &ns.uts}, {"ipc", &ns.ipc}} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, x.name))
		if err != nil {
			ns.close()
			return nil, err
		}
		*x.f = f
	}
	return ns, nil
}

func (ns *vmNamespaces) close() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.closed = true
	for _, f := range []*os.File{ns.pid, ns.mnt, ns.uts, ns.ipc} {
		if f != nil {
			f.Close()
		}
	}
}
