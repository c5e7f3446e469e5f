package compute

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/testenv"
)

// BenchmarkVMStart measures a utility VM from HcsCreateComputeSystem to Running (create, start:
// budget, boot checks, the guest's C: mounted, the VM init in its namespaces and cgroup, the guest
// connection) and reports the VM init's resident memory, the emulator's per-VM overhead. These are
// emulator figures: a Windows utility VM boots a kernel and takes seconds (docs/notes/hyperv.md
// §6).
func BenchmarkVMStart(b *testing.B) {
	testenv.RequireRoot(b, "namespaces, cgroups, mounts")
	e, err := NewEngine(context.Background(), Config{Root: b.TempDir() + "/root", OSVersion: "10.0.20348.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	layer := b.TempDir()
	for p, data := range map[string]string{
		"UtilityVM/Files/EFI/Microsoft/Boot/bootmgfw.efi": "boot",
		"UtilityVM/Files/" + osBuildFile:                  "10.0.20348.1",
	} {
		os.MkdirAll(layer+"/"+p[:strings.LastIndex(p, "/")], 0o755)
		if err := os.WriteFile(layer+"/"+p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	disk := b.TempDir() + "/sandbox.vhdx"
	if err := os.WriteFile(disk, emuvhdx.Encode(1<<30, ""), 0o644); err != nil {
		b.Fatal(err)
	}
	doc := vmDocument(layer, disk, 1024, 2)
	var rssKB uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("bench%d@vm", i)
		sub := newRecorder()
		if _, err := e.CreateSystem(context.Background(), id, doc, sub); err != nil {
			b.Fatal(err)
		}
		if err := e.Start(context.Background(), wire.SystemRef{ID: id}, ""); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s, err := e.lookup(wire.SystemRef{ID: id})
		if err != nil {
			b.Fatal(err)
		}
		rssKB += vmRSSKB(s.vm.init.Pid)
		s.mu.Unlock()
		if err := e.Terminate(context.Background(), wire.SystemRef{ID: id}, ""); err != nil {
			b.Fatal(err)
		}
		e.CloseSystem(context.Background(), wire.SystemRef{ID: id}, sub)
		b.StartTimer()
	}
	b.ReportMetric(float64(rssKB)/float64(b.N), "init-RSS-KB/vm")
}

// vmRSSKB is VmRSS of a process, in KiB.
func vmRSSKB(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
