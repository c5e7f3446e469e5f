//go:build windows

package cri

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkPodStart measures what kubelet waits for when it starts a Windows pod on the node:
// RunPodSandbox, CreateContainer and StartContainer until the workload's first output is in the
// CRI log ("start"), and StopPodSandbox plus RemovePodSandbox ("teardown"). It reports p50 and
// p90 over b.N rounds: run it with -test.bench PodStart -test.benchtime 30x inside the node.
// These are emulator figures (hcsemu starts a process where Windows starts a server silo).
// It removes the pod as kubelet does (removePodSandbox: a removal containerd refuses because it
// is still handling the app container's exit is tried again) and reports how many removals were
// retried ("remove-retries"); the retries' time counts in the teardown.
func BenchmarkPodStart(b *testing.B) {
	n := connect(b)
	if _, err := n.img.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: testImage}, nil, nil); err != nil {
		b.Fatal(err)
	}
	var start, teardown []time.Duration
	retries := 0
	for i := 0; b.Loop(); i++ {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		cfg := podConfig(b, "bench")
		cfg.Metadata.Attempt = uint32(i)
		cc := containerConfig("first-output", "echo", "ready")
		t0 := time.Now()
		pod, err := n.rt.RunPodSandbox(c, cfg, "")
		if err != nil {
			b.Fatal(err)
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
		start = append(start, time.Since(t0))
		t1 := time.Now()
		if err := n.rt.StopPodSandbox(c, pod); err != nil {
			b.Fatal(err)
		}
		r, err := removePodSandbox(c, n.rt, pod)
		if err != nil {
			b.Fatal(err)
		}
		retries += r
		teardown = append(teardown, time.Since(t1))
		cancel()
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Milliseconds()), name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)*9/10].Milliseconds()), name+"-p90-ms")
	}
	report("start", start)
	report("teardown", teardown)
	b.ReportMetric(float64(retries), "remove-retries")
}
