package rootdir

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NodeMarker is the environment variable that marks an emulated node's processes with the
// node's folder: test/winnode's serve sets it on itself before it starts anything (so hcsemu,
// the wineserver, containerd.exe and the shims it starts, Wine's services inherit it), and
// `winnode kubelet` and `winnode restart` give it to what they start. test/winnode's down finds
// the node's processes by it; the tests that look at one node of a cluster tell its processes
// from other nodes' by it.
const NodeMarker = "RUNHCS_WINNODE_NODE"

// HasEnv says whether the environment pid started with holds the entry kv ("NAME=value").
func HasEnv(pid int, kv string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, e := range strings.Split(string(env), "\x00") {
		if e == kv {
			return true
		}
	}
	return false
}

// IsServe says whether pid is `<program> serve --root root`, the process `up` left running.
func IsServe(pid int, root string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 3 && args[1] == "serve" && args[2] == "--root" && args[3] == root
}

// WaitGone waits until pid has exited, or is a zombie (of someone else's: it holds nothing any
// more), or timeout has passed.
func WaitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && Running(pid) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Running says whether pid is a live process: it exists and is not a zombie. An orphan the
// node's processes leave is reaped by the machine's init whenever that gets to it (observed:
// kubelet.exe's pid was still in /proc, a zombie, just after down had ended it), so a zombie
// counts as gone.
func Running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// The state follows the command's closing parenthesis, which the command may contain.
	i := strings.LastIndexByte(string(b), ')')
	return !(i >= 0 && strings.HasPrefix(string(b[i:]), ") Z "))
}

// MountsUnder lists the mount points at or under dir, deepest first, as /proc/self/mountinfo
// names them with its octal escapes (\040 for a space) undone.
func MountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			ms = append(ms, p)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i]) > len(ms[j]) })
	return ms
}

// unescapeMount undoes mountinfo's octal escapes.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
