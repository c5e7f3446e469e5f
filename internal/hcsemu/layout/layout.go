package layout

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupControllers are the cgroup v1 controllers in which each compute system gets a group.
// The freezer pauses a system and is also how it is killed as a whole; cpuacct, memory and
// blkio account it; cpu and memory limit it; pids lists it.
var cgroupControllers = []string{"cpu", "cpuacct", "memory", "freezer", "pids", "blkio"}

// CgroupControllers returns the cgroup v1 controllers in which each compute system gets a group.
func CgroupControllers() []string { return append([]string(nil), cgroupControllers...) }

// CgroupFolder is the folder under each controller that holds every daemon's instance folder.
const CgroupFolder = "hcsemu"

// Instance is the name of the cgroup folders of the daemon whose root is root: an absolute path
// with symbolic links resolved (as the kernel shows the daemon's lock file in /proc/PID/fd), so
// that daemons of different roots never share groups.
func Instance(root string) string {
	h := fnv.New64a()
	h.Write([]byte(root))
	return fmt.Sprintf("%016x", h.Sum64())
}

// CgroupBase is the folder, relative to a controller's mount, of the daemon instance's groups:
// one folder below it per compute system.
func CgroupBase(instance string) string { return filepath.Join(CgroupFolder, instance) }

// CgroupDir is the folder <cgroupRoot>/<controller>/hcsemu/<instance> of the daemon of root
// (links in root resolved when it exists); a compute system's group is a folder in it.
// cgroupRoot is where the controllers are mounted, /sys/fs/cgroup by default.
func CgroupDir(cgroupRoot, controller, root string) string {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	return filepath.Join(cgroupRoot, controller, CgroupBase(Instance(root)))
}

// CgroupDirs are the CgroupDir of each of CgroupControllers, in that order.
func CgroupDirs(cgroupRoot, root string) []string {
	var dirs []string
	for _, c := range cgroupControllers {
		dirs = append(dirs, CgroupDir(cgroupRoot, c, root))
	}
	return dirs
}

// NetnsDir is the folder of the daemon's network namespaces (bind-mounted namespace files): the
// emulated host's (HostNetnsName), one per HNS namespace and one per utility VM.
func NetnsDir(root string) string { return filepath.Join(root, "netns") }

// HostNetnsName is the file in NetnsDir of the emulated Windows host's network namespace, which
// lives as long as the daemon.
const HostNetnsName = "host"

// RootEnv names the environment variable that tells a program beside the daemon (the Linux
// shim, for the processes of HostProcess containers: internal/hostprocess) the daemon's
// --root, from which it finds the emulated host (HostNetns); DefaultRoot when it is not set,
// as the client finds the daemon at wire.DefaultAddress without HCSEMU_ADDRESS.
const RootEnv = "HCSEMU_ROOT"

// DefaultRoot is the daemon's --root when none is given (cmd/hcsemu).
const DefaultRoot = "/var/lib/hcsemu"

// HostNetns is the file of the emulated host's network namespace of the daemon of root.
func HostNetns(root string) string { return filepath.Join(NetnsDir(root), HostNetnsName) }

// NamespaceNetns is the file of the network namespace of the HNS namespace whose id is id (as
// HNS gives it, a GUID).
func NamespaceNetns(root, id string) string { return filepath.Join(NetnsDir(root), id) }

// VMNetnsPrefix begins the name of a utility VM's network namespace file in NetnsDir.
const VMNetnsPrefix = "vm-"

// VMNetns is the file of the network namespace of the utility VM whose RuntimeId is runtimeID.
func VMNetns(root, runtimeID string) string {
	return filepath.Join(NetnsDir(root), VMNetnsPrefix+runtimeID)
}

// VMsDir is the folder of the daemon's utility VMs (a shared mount while the daemon runs; each
// VM's guest C:\ is mounted below it).
func VMsDir(root string) string { return filepath.Join(root, "vms") }

// VolumesDir is the folder of the storage filter's volumes of the daemon using root: each
// mounted at <VolumesDir>/<volume GUID>, and recorded in <VolumesDir>/<volume GUID>.json.
func VolumesDir(root string) string { return filepath.Join(root, "volumes") }

// A utility VM's init process (its "kernel": PID 1 of the VM's PID namespace) is the daemon's
// binary re-executed with VMInitArg0 as its only argument and VMInitEnv and VMInitRootEnv in
// its environment. Its command line and working folder do not name the daemon's root; its
// VMInitRootEnv, a folder under VMsDir, does.
const (
	VMInitArg0    = "hcsemu-vm-init"
	VMInitEnv     = "HCSEMU_VM_INIT"      // set, to the VM's host name
	VMInitRootEnv = "HCSEMU_VM_INIT_ROOT" // the guest's C:\, a folder under VMsDir
)

// VMInitProcesses lists the live (not zombie) VM init processes of the daemon of root, from
// procRoot (/proc).
func VMInitProcesses(procRoot, root string) []int {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	prefixes := []string{VMsDir(root) + "/"}
	if r, err := filepath.EvalSymlinks(root); err == nil && r != root {
		prefixes = append(prefixes, VMsDir(r)+"/")
	}
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(procRoot, ent.Name())
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || strings.TrimRight(string(b), "\x00") != VMInitArg0 {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil && zombie(st) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			v, ok := strings.CutPrefix(kv, VMInitRootEnv+"=")
			if ok && hasAnyPrefix(v, prefixes) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// zombie reports whether a /proc/PID/stat line is of a zombie (state Z, after the command's
// closing parenthesis).
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
