package wintest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/testenv"
)

// The counters the Windows kubelet reads (k8s.io/kubernetes v1.37.2 pkg/kubelet/winstats,
// perfcounters.go and network_stats.go), by its names.
var kubeletCounters = []string{
	`\Processor(_Total)\% Processor Time`,
	`\Process(_Total)\Working Set - Private`,
	`\Memory\Committed Bytes`,
	`\Network Adapter(*)\Packets Received/sec`,
	`\Network Adapter(*)\Packets Sent/sec`,
	`\Network Adapter(*)\Bytes Received/sec`,
	`\Network Adapter(*)\Bytes Sent/sec`,
	`\Network Adapter(*)\Packets Received Discarded`,
	`\Network Adapter(*)\Packets Received Errors`,
	`\Network Adapter(*)\Packets Outbound Discarded`,
	`\Network Adapter(*)\Packets Outbound Errors`,
}

const (
	pdhCStatusNoObject       = 0xC0000BB8
	pdhCStatusNoCounter      = 0xC0000BB9
	pdhCStatusBadCounterName = 0xC0000BC0
	pdhInvalidData           = 0xC0000BC6
	pdhMoreData              = 0x800007D2
	pdhFmtDouble             = 0x00000200
)

// pdhItem is PDH_FMT_COUNTERVALUE_ITEM_W with a PDH_FMT_DOUBLE value.
type pdhItem struct {
	name    *uint16
	cstatus uint32
	value   float64
}

var (
	modpdh = windows.NewLazySystemDLL("pdh.dll")
	// Every export github.com/JeffAshton/win_pdh binds when kubelet.exe starts: one missing
	// and kubelet panics at init.
	pdhProcs = map[string]*windows.LazyProc{}
)

func pdh(name string) *windows.LazyProc {
	if p, ok := pdhProcs[name]; ok {
		return p
	}
	p := modpdh.NewProc(name)
	pdhProcs[name] = p
	return p
}

func pdhCall(name string, args ...uintptr) uint32 {
	r, _, _ := pdh(name).Call(args...)
	return uint32(r)
}

func utf16(t *testing.T, s string) uintptr {
	t.Helper()
	p, err := windows.UTF16PtrFromString(s)
	if err != nil {
		t.Fatal(err)
	}
	return uintptr(unsafe.Pointer(p))
}

// pdhQuery opens a query with one counter and collects once, as kubelet's newPerfCounter does.
func pdhQuery(t *testing.T, path string) (query, counter uintptr) {
	t.Helper()
	if st := pdhCall("PdhOpenQuery", 0, 0, uintptr(unsafe.Pointer(&query))); st != 0 {
		t.Fatalf("PdhOpenQuery: %#x", st)
	}
	t.Cleanup(func() { pdhCall("PdhCloseQuery", query) })
	if st := pdhCall("PdhAddEnglishCounterW", query, utf16(t, path), 0, uintptr(unsafe.Pointer(&counter))); st != 0 {
		t.Fatalf("PdhAddEnglishCounterW(%s): %#x", path, st)
	}
	if st := pdhCall("PdhCollectQueryData", query); st != 0 {
		t.Fatalf("PdhCollectQueryData(%s): %#x", path, st)
	}
	return query, counter
}

// pdhArray collects again and reads the counter's values by instance, as kubelet's
// getQueriedData does (a first call for the size, PDH_MORE_DATA, then the data).
func pdhArray(t *testing.T, query, counter uintptr) (map[string]float64, uint32) {
	t.Helper()
	if st := pdhCall("PdhCollectQueryData", query); st != 0 {
		t.Fatalf("PdhCollectQueryData: %#x", st)
	}
	var size, count uint32
	var empty [1]pdhItem
	st := pdhCall("PdhGetFormattedCounterArrayW", counter, pdhFmtDouble, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&empty[0])))
	if st != pdhMoreData {
		return nil, st
	}
	buf := make([]pdhItem, size/uint32(unsafe.Sizeof(pdhItem{}))+1)
	st = pdhCall("PdhGetFormattedCounterArrayW", counter, pdhFmtDouble, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&buf[0])))
	if st != 0 {
		return nil, st
	}
	values := map[string]float64{}
	for _, it := range buf[:count] {
		if it.cstatus != 0 {
			t.Errorf("instance %q: CStatus %#x", windows.UTF16PtrToString(it.name), it.cstatus)
		}
		values[windows.UTF16PtrToString(it.name)] = it.value
	}
	return values, 0
}

// TestPdhKubeletCounters: the exports kubelet binds, the counters it adds, and PDH's errors for
// a path that names no object, no counter of a known object, or does not parse. Under Wine this
// is the stand-in hack/wine/pdh/pdh.c (Wine 8's own pdh.dll has no "Working Set - Private":
// PDH_CSTATUS_NO_COUNTER, and kubelet.exe stopped there).
func TestPdhKubeletCounters(t *testing.T) {
	for _, name := range []string{"PdhAddCounterW", "PdhAddEnglishCounterW", "PdhCloseQuery", "PdhCollectQueryData",
		"PdhGetFormattedCounterValue", "PdhGetFormattedCounterArrayW", "PdhOpenQuery", "PdhValidatePathW"} {
		if err := pdh(name).Find(); err != nil {
			t.Fatalf("pdh.dll: %v", err)
		}
	}
	if UnderWine() && os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if testenv.InCI() {
			t.Fatal("HCSEMU_TCP_ADDRESS is not set: run through make test-windows as root")
		}
		t.Skip("no emulator: the stand-in pdh.dll answers from hcsemu (make test-windows as root)")
	}
	for _, path := range kubeletCounters {
		pdhQuery(t, path)
		if st := pdhCall("PdhValidatePathW", utf16(t, path)); st != 0 {
			t.Errorf("PdhValidatePathW(%s): %#x", path, st)
		}
	}
	var query uintptr
	if st := pdhCall("PdhOpenQuery", 0, 0, uintptr(unsafe.Pointer(&query))); st != 0 {
		t.Fatalf("PdhOpenQuery: %#x", st)
	}
	defer pdhCall("PdhCloseQuery", query)
	for path, want := range map[string]uint32{
		`\No Such Object(_Total)\% Processor Time`: pdhCStatusNoObject,
		`\Processor(_Total)\No Such Counter`:       pdhCStatusNoCounter,
		`\Memory\No Such Counter`:                  pdhCStatusNoCounter,
		`Processor(_Total)\% Processor Time`:       pdhCStatusBadCounterName,
		`\processor(_total)\% processor time`:      0,
	} {
		var counter uintptr
		if st := pdhCall("PdhAddEnglishCounterW", query, utf16(t, path), 0, uintptr(unsafe.Pointer(&counter))); st != want {
			t.Errorf("PdhAddEnglishCounterW(%s): %#x, want %#x", path, st, want)
		}
		if st := pdhCall("PdhValidatePathW", utf16(t, path)); st != want {
			t.Errorf("PdhValidatePathW(%s): %#x, want %#x", path, st, want)
		}
	}
}

// TestPdhEmulatedHost: under Wine the counters are the emulated host's (hcsemu's), not the
// Linux machine's: a process spinning in the host's network namespace (hcsemu hostns) makes
// \Processor(_Total)\% Processor Time and \Process(_Total)\Working Set - Private non-zero,
// a rate has no value before two collections, and committed bytes cover the working set.
func TestPdhEmulatedHost(t *testing.T) {
	if !UnderWine() {
		t.Skip("the emulated host's counters exist under Wine only")
	}
	hcsemu, root, image := os.Getenv("RUNHCS_WINE_HCSEMU"), os.Getenv("RUNHCS_WINE_HCSEMU_ROOT"), os.Getenv("RUNHCS_WINE_IMAGE")
	if hcsemu == "" || root == "" || image == "" || os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if testenv.InCI() {
			t.Fatal("HCSEMU_TCP_ADDRESS, RUNHCS_WINE_HCSEMU, RUNHCS_WINE_HCSEMU_ROOT and RUNHCS_WINE_IMAGE are not set: run through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows sets it up when run as root")
	}
	cpuQ, cpuC := pdhQuery(t, `\Processor(_Total)\% Processor Time`)
	// One collection only: a rate has no value yet.
	var size, count uint32
	var empty [1]pdhItem
	if st := pdhCall("PdhGetFormattedCounterArrayW", cpuC, pdhFmtDouble, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&empty[0]))); st != pdhInvalidData {
		t.Errorf("a rate after one collection: %#x, want PDH_INVALID_DATA", st)
	}
	wsQ, wsC := pdhQuery(t, `\Process(_Total)\Working Set - Private`)
	cbQ, cbC := pdhQuery(t, `\Memory\Committed Bytes`)

	// The spinning process runs until the test writes its stop file (Wine gives no handle on
	// a native process to kill it by, see internal/hns hostNamespace).
	stop := filepath.ToSlash(filepath.Join(filepath.Dir(image), fmt.Sprintf("pdh-stop-%d", os.Getpid())))
	cmd := exec.Command(`Z:`+filepath.FromSlash(hcsemu), "hostns", "--root", root, "--", "/bin/sh", "-c",
		fmt.Sprintf("while [ ! -e '%s' ]; do :; done; rm -f '%s'", stop, stop))
	if err := cmd.Start(); err != nil {
		t.Fatalf("hcsemu hostns: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(`Z:`+filepath.FromSlash(stop), nil, 0o644) })

	deadline := time.Now().Add(2 * time.Minute) // a bound on a hang, not an expectation
	var cpu, ws, committed map[string]float64
	for {
		var st uint32
		if cpu, st = pdhArray(t, cpuQ, cpuC); st != 0 {
			t.Fatalf("%% Processor Time: %#x", st)
		}
		if ws, st = pdhArray(t, wsQ, wsC); st != 0 {
			t.Fatalf("Working Set - Private: %#x", st)
		}
		if committed, st = pdhArray(t, cbQ, cbC); st != 0 {
			t.Fatalf("Committed Bytes: %#x", st)
		}
		if cpu["_Total"] > 0 && ws["_Total"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a process spinning in the emulated host: %% Processor Time %v, Working Set - Private %v; want both > 0", cpu, ws)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(cpu) != 1 || cpu["_Total"] > 100 {
		t.Errorf("%% Processor Time: %v, want _Total alone, at most 100", cpu)
	}
	if len(committed) != 1 || committed[""] < ws["_Total"] {
		t.Errorf("Committed Bytes %v, Working Set - Private %v: want one value, committed ≥ working set", committed, ws)
	}
	netQ, netC := pdhQuery(t, `\Network Adapter(*)\Bytes Received/sec`)
	adapters, st := pdhArray(t, netQ, netC)
	if st != 0 {
		t.Fatalf("Network Adapter(*): %#x", st)
	}
	if _, ok := adapters["lo"]; ok {
		t.Errorf("Network Adapter(*): %v lists loopback", adapters)
	}
}

const (
	pdhCStatusInvalidData = 0xC0000BBA
	pdhFmtNoCap100        = 0x00008000
)

// pdhValues reads a counter's items (PdhGetFormattedCounterArrayW, sized first as kubelet
// does) with their own CStatus, without collecting.
func pdhValues(t *testing.T, counter uintptr, format uint32) (map[string]pdhItem, uint32) {
	t.Helper()
	var size, count uint32
	var empty [1]pdhItem
	st := pdhCall("PdhGetFormattedCounterArrayW", counter, uintptr(format), uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&empty[0])))
	if st != pdhMoreData {
		return nil, st
	}
	buf := make([]pdhItem, size/uint32(unsafe.Sizeof(pdhItem{}))+1)
	if st = pdhCall("PdhGetFormattedCounterArrayW", counter, uintptr(format), uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&buf[0]))); st != 0 {
		return nil, st
	}
	items := map[string]pdhItem{}
	for _, it := range buf[:count] {
		items[windows.UTF16PtrToString(it.name)] = it
	}
	return items, 0
}

// fakeHostPerformance serves the wire protocol's GetHostPerformance as hcsemu does, answering
// the stand-in pdh.dll's collections one sample after the other, so that the DLL's arithmetic
// is checked against known figures. It sets HCSEMU_TCP_ADDRESS and HCSEMU_TCP_KEY_FILE for this
// process, whose pdh.dll must not have dialled yet.
func fakeHostPerformance(t *testing.T, samples []wire.HostPerformance) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	keyFile := filepath.Join(t.TempDir(), "key")
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HCSEMU_TCP_ADDRESS", l.Addr().String())
	t.Setenv("HCSEMU_TCP_KEY_FILE", keyFile)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		next := 0
		for {
			f, err := wire.ReadFrame(c)
			if err != nil {
				return
			}
			r := &wire.Frame{ID: f.ID}
			switch f.Method {
			case wire.MethodAuthenticate:
				var a wire.AuthenticateArgs
				if f.DecodeArgs(&a) != nil || a.Key != key {
					return
				}
			case wire.MethodClientPaths:
			case wire.MethodGetHostPerformance:
				if next == len(samples) {
					return
				}
				r.Reply, _ = json.Marshal(samples[next])
				next++
			default:
				return
			}
			if wire.WriteFrame(c, r) != nil {
				return
			}
		}
	}()
}

// TestPdhRateArithmetic checks the stand-in pdh.dll's arithmetic against known samples from a
// fake hcsemu, in a child process (the DLL dials once per process):
//   - \Processor(_Total)\% Processor Time is the busy share of all processors between the
//     query's last two collections, 0 to 100 (5 s busy over 10 s on 2 processors: 25), capped
//     at 100 unless PDH_FMT_NOCAP100, and 0 over an interval whose busy time went back;
//   - a rate has no value after one collection (PDH_INVALID_DATA), a raw counter has;
//   - a wildcard counter's array succeeds with each instance's own CStatus: a network adapter
//     seen for the first time in the last collection is PDH_CSTATUS_INVALID_DATA while the
//     others have their rate (before, the whole array failed and kubelet kept none of the node's
//     figures).
func TestPdhRateArithmetic(t *testing.T) {
	if !UnderWine() {
		t.Skip("the stand-in pdh.dll, which answers from hcsemu, exists under Wine only")
	}
	if os.Getenv("RUNHCS_PDH_FAKE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPdhRateArithmetic$", "-test.v")
		cmd.Env = append(os.Environ(), "RUNHCS_PDH_FAKE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestPdhRateArithmetic") {
			t.Fatalf("the child: %v\n%s", err, out)
		}
		return
	}
	const s = uint64(time.Second)
	eth := func(rx uint64) wire.HostAdapter { return wire.HostAdapter{Name: "eth0", BytesReceived: rx} }
	fakeHostPerformance(t, []wire.HostPerformance{
		{TimestampNs: 0, Processors: 2, ProcessorBusyNs: 0, CommittedBytes: 4096, Adapters: []wire.HostAdapter{eth(1000)}},
		{TimestampNs: int64(10 * s), Processors: 2, ProcessorBusyNs: 5 * s, CommittedBytes: 8192,
			Adapters: []wire.HostAdapter{eth(6000), {Name: "hep1", BytesReceived: 77}}},
		{TimestampNs: int64(20 * s), Processors: 2, ProcessorBusyNs: 35 * s, CommittedBytes: 8192,
			Adapters: []wire.HostAdapter{eth(6000), {Name: "hep1", BytesReceived: 1077}}},
		{TimestampNs: int64(30 * s), Processors: 2, ProcessorBusyNs: 1 * s, CommittedBytes: 8192,
			Adapters: []wire.HostAdapter{eth(6000), {Name: "hep1", BytesReceived: 1077}}},
	})
	var query, cpu, rx, committed uintptr
	if st := pdhCall("PdhOpenQuery", 0, 0, uintptr(unsafe.Pointer(&query))); st != 0 {
		t.Fatalf("PdhOpenQuery: %#x", st)
	}
	defer pdhCall("PdhCloseQuery", query)
	for path, h := range map[string]*uintptr{
		`\Processor(_Total)\% Processor Time`:    &cpu,
		`\Network Adapter(*)\Bytes Received/sec`: &rx,
		`\Memory\Committed Bytes`:                &committed,
	} {
		if st := pdhCall("PdhAddEnglishCounterW", query, utf16(t, path), 0, uintptr(unsafe.Pointer(h))); st != 0 {
			t.Fatalf("PdhAddEnglishCounterW(%s): %#x", path, st)
		}
	}
	collect := func() {
		t.Helper()
		if st := pdhCall("PdhCollectQueryData", query); st != 0 {
			t.Fatalf("PdhCollectQueryData: %#x", st)
		}
	}
	want := func(what string, counter uintptr, format uint32, instance string, status uint32, value float64) {
		t.Helper()
		items, st := pdhValues(t, counter, format)
		if st != 0 {
			t.Errorf("%s: %#x, want the array", what, st)
			return
		}
		it, ok := items[instance]
		if !ok || it.cstatus != status || it.value != value {
			t.Errorf("%s: %q is %+v (present %v), want CStatus %#x, value %v", what, instance, it, ok, status, value)
		}
	}

	collect()
	if _, st := pdhValues(t, cpu, pdhFmtDouble); st != pdhInvalidData {
		t.Errorf("%% Processor Time after one collection: %#x, want PDH_INVALID_DATA", st)
	}
	if _, st := pdhValues(t, rx, pdhFmtDouble); st != pdhInvalidData {
		t.Errorf("Bytes Received/sec after one collection: %#x, want PDH_INVALID_DATA", st)
	}
	want("Committed Bytes after one collection", committed, pdhFmtDouble, "", 0, 4096)

	collect()
	want("% Processor Time, 5 s busy in 10 s on 2 processors", cpu, pdhFmtDouble, "_Total", 0, 25)
	want("Bytes Received/sec of eth0", rx, pdhFmtDouble, "eth0", 0, 500)
	want("Bytes Received/sec of a new adapter", rx, pdhFmtDouble, "hep1", pdhCStatusInvalidData, 0)

	collect()
	want("% Processor Time, 30 s busy in 10 s on 2 processors", cpu, pdhFmtDouble, "_Total", 0, 100)
	want("% Processor Time with PDH_FMT_NOCAP100", cpu, pdhFmtDouble|pdhFmtNoCap100, "_Total", 0, 150)
	want("Bytes Received/sec of the adapter, now seen twice", rx, pdhFmtDouble, "hep1", 0, 100)
	want("Bytes Received/sec of eth0, idle", rx, pdhFmtDouble, "eth0", 0, 0)

	collect()
	want("% Processor Time over an interval whose busy time went back", cpu, pdhFmtDouble, "_Total", 0, 0)
}
