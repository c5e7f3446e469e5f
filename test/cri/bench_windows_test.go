//go:build windows

package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podsandboxHandler is the process-isolated handler that keeps the pause container on a node
// whose default handler runs pods through the shim's sandbox API (--sandboxer shim; test/winnode
// config.go): the two sandboxers side by side on one node.
const podsandboxHandler = "runhcs-wcow-process-podsandbox"

// hypervPodsandboxHandler is its Hyper-V counterpart: on such a node the Hyper-V handler's pods
// go through the sandbox API too, and this one keeps the pause container.
const hypervPodsandboxHandler = "runhcs-wcow-hypervisor-podsandbox"

// benchHandler is one runtime handler BenchmarkPodStart measures, and the prefix of its metrics.
type benchHandler struct{ label, handler string }

// BenchmarkPodStart measures what kubelet waits for when it starts a Windows pod on the node:
// RunPodSandbox, CreateContainer and StartContainer until the workload's first output is in the
// CRI log ("start"), and StopPodSandbox plus RemovePodSandbox ("teardown"). It reports p50 and
// p90 over b.N rounds: run it with -test.bench PodStart -test.benchtime 30x inside the node.
// These are emulator figures (hcsemu starts a process where Windows starts a server silo).
//
// On a node with --sandboxer shim, each round starts and tears down one pod of each handler, in
// turn, so that the sandboxers share the machine's load alike: "shim-" (the default handler,
// the shim's sandbox API), "podsandbox-" (runhcs-wcow-process-podsandbox, the pause container),
// "hyperv-shim-" (runhcs-wcow-hypervisor, Hyper-V through the sandbox API) and
// "hyperv-podsandbox-" (runhcs-wcow-hypervisor-podsandbox, Hyper-V with the pause container).
// On other nodes it measures the default handler alone.
//
// It removes the pod as kubelet does (removePodSandbox: a removal containerd refuses because it
// is still handling the app container's exit is tried again) and reports how many removals were
// retried ("remove-retries"); the retries' time counts in the teardown.
func BenchmarkPodStart(b *testing.B) {
	n := connect(b)
	if _, err := n.img.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: testImage}, nil, nil); err != nil {
		b.Fatal(err)
	}
	handlers := []benchHandler{{"", ""}}
	if shimSandboxer(b) {
		handlers = []benchHandler{{"shim-", ""}, {"podsandbox-", podsandboxHandler}, {"hyperv-shim-", hypervHandler}, {"hyperv-podsandbox-", hypervPodsandboxHandler}}
	}
	start := make([][]time.Duration, len(handlers))
	teardown := make([][]time.Duration, len(handlers))
	retries := 0
	for i := 0; b.Loop(); i++ {
		for h, bh := range handlers {
			s, td, r := podRound(b, n, bh.handler, i)
			start[h] = append(start[h], s)
			teardown[h] = append(teardown[h], td)
			retries += r
		}
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Milliseconds()), name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)*9/10].Milliseconds()), name+"-p90-ms")
	}
	for h, bh := range handlers {
		report(bh.label+"start", start[h])
		report(bh.label+"teardown", teardown[h])
	}
	b.ReportMetric(float64(retries), "remove-retries")
}

// podRound starts one pod of handler ("" for the default) with a container that prints a line,
// waits for the line in the CRI log, and tears the pod down. It returns the start and teardown
// times and the retried removals.
func podRound(b *testing.B, n *node, handler string, i int) (start, teardown time.Duration, retries int) {
	b.Helper()
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	cfg := podConfig(b, "bench")
	cfg.Metadata.Attempt = uint32(i)
	cc := containerConfig("first-output", "echo", "ready")
	t0 := time.Now()
	pod, err := n.rt.RunPodSandbox(c, cfg, handler)
	if err != nil {
		b.Fatalf("RunPodSandbox (handler %q): %v", handler, err)
	}
	id, err := n.rt.CreateContainer(c, pod, cc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.rt.StartContainer(c, id); err != nil {
		b.Fatal(err)
	}
	logPath := filepath.Join(cfg.LogDirectory, cc.LogPath)
	for {
		if l, _ := os.ReadFile(logPath); strings.Contains(string(l), " stdout F ready") {
			break
		}
		if c.Err() != nil {
			b.Fatalf("no first output in %s", logPath)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start = time.Since(t0)
	t1 := time.Now()
	if err := n.rt.StopPodSandbox(c, pod); err != nil {
		b.Fatal(err)
	}
	if retries, err = removePodSandbox(c, n.rt, pod); err != nil {
		b.Fatal(fmt.Errorf("handler %q: %w", handler, err))
	}
	return start, time.Since(t1), retries
}
