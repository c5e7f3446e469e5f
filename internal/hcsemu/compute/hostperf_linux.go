package compute

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
	ledger := hostBusyLedger(e.cfg.Root)
	// Held across the scan, so that two samples taken at once are applied in the order they
	// were read and a process gone in between is not counted alive again.
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	live := map[procID]uint64{}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		var ns unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &ns) != nil || ns.Ino != host.Ino || ns.Dev != host.Dev {
			continue
		}
		busy, private, swapped, start := procFigures(pid)
		if start != 0 {
			live[procID{pid, start}] = busy
		}
		p.WorkingSetPrivateBytes += private
		p.CommittedBytes += private + swapped
	}
	p.ProcessorBusyNs += ledger.total(live)
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

// procID names one process over time: its pid and its start time (clock ticks after boot),
// since a pid is reused.
type procID struct {
	pid   int
	start uint64
}

// busyLedger keeps the processor time of the emulated host's own processes monotonic. On
// Windows \Processor(_Total)\% Processor Time comes from the processors' idle time
// (PERF_100NSEC_TIMER_INV), so a process that exits takes nothing back; a sum over the live
// processes of the host's namespace fell by the time of every process that exited (under Wine
// processes come and go: CNI plugins, a container's hcsemu hostns relays, …), and pdh.dll read
// such an interval as 0. The ledger remembers each process's time at the last sample and,
// once it is gone, keeps that time. Assumption: a process that lives less than one sampling
// interval (kubelet's 10 s) between two samples is not seen at all; its time is missing, as
// it is from any sum of what /proc shows.
type busyLedger struct {
	mu      sync.Mutex
	live    map[procID]uint64 // busy ns of each process at the last sample
	retired uint64            // busy ns of the processes gone since they were seen
}

// busyLedgers holds a ledger per emulated host (the engine's root): hcsemu serves one host,
// tests start several in one process.
var busyLedgers sync.Map

func hostBusyLedger(root string) *busyLedger {
	l, _ := busyLedgers.LoadOrStore(root, &busyLedger{})
	return l.(*busyLedger)
}

// total takes this sample's live processes (their busy ns; mu held) and returns the host's
// processor time: theirs and that of every process seen before and gone since. It never
// decreases: a process's own time never goes back either.
func (l *busyLedger) total(now map[procID]uint64) uint64 {
	for id, busy := range l.live {
		if _, ok := now[id]; !ok {
			l.retired += busy
		}
	}
	sum := l.retired
	for id, busy := range now {
		if prev := l.live[id]; busy < prev {
			now[id] = prev
			busy = prev
		}
		sum += busy
	}
	l.live = now
	return sum
}

// procFigures reads a process's processor time (user and system, ns), private resident memory
// (RssAnon) and swapped-out memory (VmSwap), in bytes, and its start time (clock ticks after
// boot); zeros for a process that is gone.
func procFigures(pid int) (busyNs, private, swapped, start uint64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command name (field 2) may hold spaces and parentheses: fields count from
		// the last ')'. utime and stime are fields 14 and 15, in USER_HZ ticks, starttime
		// field 22 (proc(5)).
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 19 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				s, _ := strconv.ParseUint(f[12], 10, 64)
				busyNs = (u + s) * (1_000_000_000 / userHZ)
				start, _ = strconv.ParseUint(f[19], 10, 64)
			}
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return busyNs, 0, 0, start
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
	return busyNs, private, swapped, start
}
