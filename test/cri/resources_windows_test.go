//go:build windows

package cri

import (
	"errors"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// execAlloc runs the workload's alloc of mb MiB in the container (the program at prog) and
// returns its error (an exit status error when the allocation failed).
func execAlloc(t *testing.T, n *node, id, prog, mb string) error {
	t.Helper()
	stdout, _, err := n.rt.ExecSync(ctx(t), id, []string{prog, "alloc", mb}, time.Minute)
	if err == nil && string(stdout) != "allocated "+mb+" MiB\n" {
		t.Fatalf("alloc %s MiB: stdout %q", mb, stdout)
	}
	return err
}

// TestUpdateMemoryLimit lowers a running container's memory limit with
// UpdateContainerResources: an allocation that fitted before fails in the workload after, as a
// job object's limit makes it fail on Windows, and a small one still succeeds. Process isolated
// and in a Hyper-V pod (the shim's Update is an HCS modify of Container/Memory; a limit HCS
// cannot take is refused), and as a HostProcess container (the limit of its job object, which
// Wine 8 does not enforce and hack/wine/winemem.c does: the workload's commit fails).
func TestUpdateMemoryLimit(t *testing.T) {
	for _, tc := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}, {"hostprocess", ""}} {
		t.Run(tc.name, func(t *testing.T) { testUpdateMemoryLimit(t, tc.handler, tc.name == "hostprocess") })
	}
}

// runLimitsPod runs the pod for a resources test: a HostProcess pod, or one with handler.
func runLimitsPod(t *testing.T, n *node, name, handler string, hostProcess bool) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	if hostProcess {
		cfg := hostProcessPod(t, name+"-hpc")
		return runPodConfig(t, n, cfg, ""), cfg
	}
	return runPodWith(t, n, name, handler)
}

func testUpdateMemoryLimit(t *testing.T, handler string, hostProcess bool) {
	n := connect(t)
	pod, podCfg := runLimitsPod(t, n, "pod-update-mem", handler, hostProcess)
	cfg, prog := containerConfig("limited", "sleep", "600"), workload
	if hostProcess {
		cfg, prog = hostProcessContainer("limited", "sleep", "600"), hostProcessWorkload
	}
	id := startContainer(t, n, pod, podCfg, cfg)
	if err := execAlloc(t, n, id, prog, "128"); err != nil {
		t.Fatalf("alloc 128 MiB before any limit: %v", err)
	}
	if err := n.rt.UpdateContainerResources(ctx(t), id, &runtimeapi.ContainerResources{
		Windows: &runtimeapi.WindowsContainerResources{MemoryLimitInBytes: 64 * mib},
	}); err != nil {
		t.Fatalf("UpdateContainerResources MemoryLimitInBytes 64 MiB: %v", err)
	}
	var exitErr interface{ ExitStatus() int }
	if err := execAlloc(t, n, id, prog, "128"); !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 {
		t.Fatalf("alloc 128 MiB under a 64 MiB limit: %v; want it to fail", err)
	}
	if err := execAlloc(t, n, id, prog, "8"); err != nil {
		t.Fatalf("alloc 8 MiB under a 64 MiB limit: %v", err)
	}
	if !hostProcess {
		// HCS takes the limit in MiB: one below 1 MiB is refused, naming the field and the
		// value, and the 64 MiB limit stays. (A job object takes any byte count.)
		err := n.rt.UpdateContainerResources(ctx(t), id, &runtimeapi.ContainerResources{
			Windows: &runtimeapi.WindowsContainerResources{MemoryLimitInBytes: 512 << 10},
		})
		if err == nil || !strings.Contains(err.Error(), "memory.limit") || !strings.Contains(err.Error(), "524288") {
			t.Fatalf("UpdateContainerResources MemoryLimitInBytes 512 KiB: %v; want a refusal naming memory.limit and 524288", err)
		}
		if err := execAlloc(t, n, id, prog, "128"); !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 {
			t.Fatalf("alloc 128 MiB after a refused update: %v; want the 64 MiB limit to hold", err)
		}
	} else {
		// Raised again, the limit lets it through: the job's limit, not something else, stopped it.
		if err := n.rt.UpdateContainerResources(ctx(t), id, &runtimeapi.ContainerResources{
			Windows: &runtimeapi.WindowsContainerResources{MemoryLimitInBytes: 512 * mib},
		}); err != nil {
			t.Fatalf("UpdateContainerResources MemoryLimitInBytes 512 MiB: %v", err)
		}
		if err := execAlloc(t, n, id, prog, "128"); err != nil {
			t.Fatalf("alloc 128 MiB under a 512 MiB limit: %v", err)
		}
	}
	st, err := n.rt.ContainerStatus(ctx(t), id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after the update: %v, %v; want running", st.GetStatus().GetState(), err)
	}
}

// cpuRate is the container's CPU use in cores over a window, from two CRI stats reads (their
// own timestamps, not this test's clock).
func cpuRate(t *testing.T, n *node, id string, window time.Duration) float64 {
	t.Helper()
	a := containerStats(t, n, id)
	time.Sleep(window)
	b := containerStats(t, n, id)
	wall := b.GetCpu().GetTimestamp() - a.GetCpu().GetTimestamp()
	if wall <= 0 {
		t.Fatalf("CPU stats timestamps %d then %d", a.GetCpu().GetTimestamp(), b.GetCpu().GetTimestamp())
	}
	return float64(cpuNS(b)-cpuNS(a)) / float64(wall)
}

// TestUpdateCPUMaximum caps a spinning container with UpdateContainerResources' CpuMaximum
// (hundredths of a percent of the host's processors, an HCS modify of Container/Processor): its
// CPU rate, measured with CRI stats, drops. A maximum Windows refuses (above 10000) fails the
// call with an error naming the field and leaves the container running. Process isolated, in
// a Hyper-V pod, and as a HostProcess container (the cap of its job object, with the job's
// accounting as its stats; under Wine hack/wine/winejob.c enforces the job's hard cap).
func TestUpdateCPUMaximum(t *testing.T) {
	for _, tc := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}, {"hostprocess", ""}} {
		t.Run(tc.name, func(t *testing.T) { testUpdateCPUMaximum(t, tc.handler, tc.name == "hostprocess") })
	}
}

func testUpdateCPUMaximum(t *testing.T, handler string, hostProcess bool) {
	n := connect(t)
	pod, podCfg := runLimitsPod(t, n, "pod-update-cpu", handler, hostProcess)
	cfg := containerConfig("spinner", "spin", "600")
	if hostProcess {
		cfg = hostProcessContainer("spinner", "spin", "600")
	}
	id := startContainer(t, n, pod, podCfg, cfg)
	// Let it start spinning before the first window.
	waitStats(t, n, id, "CPU time", func(st *runtimeapi.ContainerStats) bool { return cpuNS(st) > 0 })
	before := cpuRate(t, n, id, 3*time.Second)

	// 2% of the host: 0.04 cores on this 2-core machine.
	if err := n.rt.UpdateContainerResources(ctx(t), id, &runtimeapi.ContainerResources{
		Windows: &runtimeapi.WindowsContainerResources{CpuMaximum: 200},
	}); err != nil {
		t.Fatalf("UpdateContainerResources CpuMaximum 200: %v", err)
	}
	after := cpuRate(t, n, id, 3*time.Second)
	t.Logf("CPU rate %.3f cores before the cap, %.3f after", before, after)
	// Generous: a loaded machine may give the spinner little before, the cap gives it 0.04.
	if after >= before || after > 0.2 {
		t.Fatalf("CPU rate %.3f cores before the cap, %.3f after CpuMaximum 200: want it to drop to about 0.04", before, after)
	}

	err := n.rt.UpdateContainerResources(ctx(t), id, &runtimeapi.ContainerResources{
		Windows: &runtimeapi.WindowsContainerResources{CpuMaximum: 20000},
	})
	if err == nil || !strings.Contains(err.Error(), "cpu.maximum") || !strings.Contains(err.Error(), "20000") {
		t.Fatalf("UpdateContainerResources CpuMaximum 20000: %v; want a refusal naming cpu.maximum and 20000", err)
	}
	st, err := n.rt.ContainerStatus(ctx(t), id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after a refused update: %v, %v; want running", st.GetStatus().GetState(), err)
	}
}

// TestCPUShares runs two containers with CpuShares 10000 and two with CpuShares 1 in one pod,
// all four spinning on this machine's processors (two cores: twice as many spinners as
// processors), and compares their CPU time over the same window, from CRI stats: the heavy
// pair gets more than twice the light pair's. CRI's shares are Windows' processor weight
// (1..10000, containerd's windows.resources.cpu.shares), a job's CPU weight 9 and 1 for a
// HostProcess container (hcsshim's conversion; under Wine hack/wine/winemem.c makes it the nice
// value of the job's threads and session). Process isolated, in a Hyper-V pod, and as
// HostProcess containers. A comparison over one interval, not a timing expectation: Windows
// documents the weight as a relative share, not a figure.
func TestCPUShares(t *testing.T) {
	for _, tc := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}, {"hostprocess", ""}} {
		t.Run(tc.name, func(t *testing.T) { testCPUShares(t, tc.handler, tc.name == "hostprocess") })
	}
}

func testCPUShares(t *testing.T, handler string, hostProcess bool) {
	n := connect(t)
	pod, podCfg := runLimitsPod(t, n, "pod-cpu-shares", handler, hostProcess)
	start := func(name string, shares int64) string {
		t.Helper()
		cfg := containerConfig(name, "spin", "600")
		if hostProcess {
			cfg = hostProcessContainer(name, "spin", "600")
		}
		cfg.Windows.Resources.CpuShares = shares
		return startContainer(t, n, pod, podCfg, cfg)
	}
	heavy := []string{start("heavy-1", 10000), start("heavy-2", 10000)}
	light := []string{start("light-1", 1), start("light-2", 1)}
	all := append(append([]string{}, heavy...), light...)
	for _, id := range all {
		waitStats(t, n, id, "CPU time", func(st *runtimeapi.ContainerStats) bool { return cpuNS(st) > 0 })
	}
	before := make(map[string]*runtimeapi.ContainerStats)
	for _, id := range all {
		before[id] = containerStats(t, n, id)
	}
	time.Sleep(3 * time.Second)
	rate := func(ids []string) float64 {
		var r float64
		for _, id := range ids {
			a, b := before[id], containerStats(t, n, id)
			wall := b.GetCpu().GetTimestamp() - a.GetCpu().GetTimestamp()
			if wall <= 0 {
				t.Fatalf("%s: CPU stats timestamps %d then %d", id, a.GetCpu().GetTimestamp(), b.GetCpu().GetTimestamp())
			}
			r += float64(cpuNS(b)-cpuNS(a)) / float64(wall)
		}
		return r
	}
	h, l := rate(heavy), rate(light)
	t.Logf("two containers with CpuShares 10000 used %.3f cores, two with CpuShares 1 %.3f", h, l)
	if h <= 2*l {
		t.Errorf("containers with CpuShares 10000 used %.3f cores, with CpuShares 1 %.3f: want more than twice", h, l)
	}
}
