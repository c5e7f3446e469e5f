package compute

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The emulated host's performance figures (wire.MethodGetHostPerformance), which the stand-in
// pdh.dll serves as Windows' performance counters. The emulated host's processes are the
// processes in its network namespace (<root>/netns/host: the node's Windows programs, which run
// there through `hcsemu hostns`) and those of its compute systems (the cgroups under the
// daemon's, which also keep the time of processes that have exited). Its memory and
// processors are the daemon's --host-memory-mb and --host-processors; its network adapters are
// the interfaces of its namespace (the networks' bridges and the endpoints' host ends),
// loopback excepted. Assumption: the adapters keep their Linux names (hns…, hep…); Windows
// names them after the device ("vEthernet (…)", "Hyper-V Virtual Ethernet Adapter #2"), and no
// client here matches a name.

// hostPerfMethods serve the emulated host's figures.
var hostPerfMethods = map[string]method{
	wire.MethodGetHostPerformance: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, _ struct{}) (dispatch.Answer, error) {
		p, err := e.HostPerformance(ctx)
		return dispatch.Answer{Reply: p}, err
	}),
}

// monoStart anchors HostPerformance.TimestampNs: Go's monotonic clock, read through
// time.Since.
var monoStart = time.Now()

// HostPerformance samples the emulated host's figures.
func (e *Engine) HostPerformance(ctx context.Context) (*wire.HostPerformance, error) {
	p := &wire.HostPerformance{
		TimestampNs:      int64(time.Since(monoStart)),
		Processors:       e.hostCPUs,
		MemoryTotalBytes: e.vmHost.memMB << 20,
	}
	// The compute systems: the daemon's base group holds every system's group.
	base := &cgroup{m: e.cg}
	p.ProcessorBusyNs = base.readUint("cpuacct", "cpuacct.usage")
	if st, err := base.read("memory", "memory.stat"); err == nil {
		for _, line := range strings.Split(st, "\n") {
			k, v, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseUint(v, 10, 64)
			switch k {
			case "total_rss":
				p.WorkingSetPrivateBytes += n
				p.CommittedBytes += n
			case "total_swap":
				p.CommittedBytes += n
			}
		}
	}
	// The host's own processes.
	hostPath := hns.HostNetnsPath(e.cfg.Root)
	var host unix.Stat_t
	if err := unix.Stat(hostPath, &host); err != nil {
		return nil, fmt.Errorf("the emulated host's network namespace: %w", err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		var ns unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &ns) != nil || ns.Ino != host.Ino || ns.Dev != host.Dev {
			continue
		}
		busy, private, swapped := procFigures(pid)
		p.ProcessorBusyNs += busy
		p.WorkingSetPrivateBytes += private
		p.CommittedBytes += private + swapped
	}
	h, err := netns.GetFromPath(hostPath)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("the emulated host's network adapters: %w", err)
	}
	p.Adapters = []wire.HostAdapter{}
	for _, l := range links {
		a := l.Attrs()
		if a.Flags&net.FlagLoopback != 0 || a.Statistics == nil {
			continue
		}
		s := a.Statistics
		p.Adapters = append(p.Adapters, wire.HostAdapter{
			Name: a.Name, BytesReceived: s.RxBytes, BytesSent: s.TxBytes, PacketsReceived: s.RxPackets, PacketsSent: s.TxPackets,
			PacketsReceivedDiscarded: s.RxDropped, PacketsReceivedErrors: s.RxErrors,
			PacketsOutboundDiscarded: s.TxDropped, PacketsOutboundErrors: s.TxErrors,
		})
	}
	return p, nil
}

// procFigures reads a process's processor time (user and system, ns), private resident memory
// (RssAnon) and swapped-out memory (VmSwap), in bytes; zeros for a process that is gone.
func procFigures(pid int) (busyNs, private, swapped uint64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command name (field 2) may hold spaces and parentheses: fields count from
		// the last ')'. utime and stime are fields 14 and 15, in USER_HZ ticks.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				s, _ := strconv.ParseUint(f[12], 10, 64)
				busyNs = (u + s) * (1_000_000_000 / userHZ)
			}
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return busyNs, 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "RssAnon":
			private = kb << 10
		case "VmSwap":
			swapped = kb << 10
		}
	}
	return busyNs, private, swapped
}
