//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// staticPod is the standalone kubelet's pod: the test image's workload printing "tick N" every
// second, pulled from the node's registry (any registry name resolves there).
const staticPod = `apiVersion: v1
kind: Pod
metadata:
  name: ticker
  namespace: default
spec:
  containers:
  - name: ticker
    image: docker.io/` + "runhcs/test:latest" + `
    imagePullPolicy: IfNotPresent
    command: ['C:\workload\workload.exe', 'tick', '1']
`

// summary is the part of kubelet's /stats/summary (k8s.io/kubelet pkg/apis/stats/v1alpha1)
// the test reads.
type summary struct {
	Node struct {
		NodeName string `json:"nodeName"`
		CPU      *struct {
			UsageCoreNanoSeconds *uint64 `json:"usageCoreNanoSeconds"`
		} `json:"cpu"`
		Memory *struct {
			WorkingSetBytes *uint64 `json:"workingSetBytes"`
			UsageBytes      *uint64 `json:"usageBytes"`
		} `json:"memory"`
	} `json:"node"`
	Pods []struct {
		PodRef struct {
			Name string `json:"name"`
		} `json:"podRef"`
	} `json:"pods"`
}

// TestKubeletStaticPod runs kubelet.exe (the Windows build, RUNHCS_WINNODE_KUBELET) standalone
// in the node at RUNHCS_WINNODE_ROOT (hack/winnode.sh test-kubelet brings it up): `winnode
// kubelet` returns once its healthz answers; a static pod of the test image runs through the
// node's containerd.exe and the shim, and its workload's line reaches the container's log
// (kubelet's C:\var\log\pods in the prefix); kubelet's /stats/summary (read-only port, in the
// emulated host's namespace) shows the node's processor time and memory, which kubelet reads
// from PDH counters, that is from the stand-in pdh.dll and hcsemu's figures for the emulated
// host. Then `winnode down` ends kubelet.exe with the node and leaves nothing.
func TestKubeletStaticPod(t *testing.T) {
	testenv.RequireRoot(t, "the node runs hcsemu")
	root, kubelet := os.Getenv("RUNHCS_WINNODE_ROOT"), os.Getenv("RUNHCS_WINNODE_KUBELET")
	if root == "" || kubelet == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINNODE_ROOT and RUNHCS_WINNODE_KUBELET are not set: run through hack/winnode.sh test-kubelet")
		}
		t.Skip("no node or kubelet.exe: run through hack/winnode.sh test-kubelet")
	}
	self := filepath.Join(root, "bin", "winnode")
	winnode := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(self, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("winnode %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	logPath := filepath.Join(root, "logs", "kubelet.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("the end of %s:\n%s", logPath, b)
		}
	})

	// Bad input names the flag.
	if out, err := exec.Command(self, "kubelet", "--root", root, "--exe", filepath.Join(root, "no-such.exe")).CombinedOutput(); err == nil || !strings.Contains(string(out), "--exe") {
		t.Errorf("winnode kubelet with a missing --exe: %v, %s", err, out)
	}
	if err := os.MkdirAll(kubeletManifests(root), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kubeletManifests(root), "ticker.yaml"), []byte(staticPod), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	winnode("kubelet", "--root", root, "--exe", kubelet, "--node-name", "winnode-kubelet")
	t.Logf("kubelet healthy after %.1fs", time.Since(start).Seconds())

	// The workload's line in the container's log. Bounds below are against hangs, not
	// expectations of speed.
	logs := filepath.Join(root, "wine", "prefix", "drive_c", "var", "log", "pods")
	var found string
	waitUntil(t, "the workload's line in the container's log under "+logs, 10*time.Minute, func() bool {
		files, _ := filepath.Glob(filepath.Join(logs, "default_ticker-winnode-kubelet_*", "ticker", "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), " stdout F tick 1") {
				found = f
				return true
			}
		}
		return false
	})
	t.Logf("the pod's line after %.1fs in %s", time.Since(start).Seconds(), found)

	// The node's figures, once kubelet's counters have been collected (every 10 s).
	var s summary
	waitUntil(t, "non-zero node processor time and memory in /stats/summary", 5*time.Minute, func() bool {
		b, err := hostGet(root, fmt.Sprintf("http://127.0.0.1:%d/stats/summary", kubeletReadOnlyPort))
		if err != nil {
			return false
		}
		s = summary{}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("/stats/summary: %v: %s", err, b)
		}
		n := s.Node
		return n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil && *n.CPU.UsageCoreNanoSeconds > 0 &&
			n.Memory != nil && n.Memory.WorkingSetBytes != nil && *n.Memory.WorkingSetBytes > 0 &&
			n.Memory.UsageBytes != nil && *n.Memory.UsageBytes >= *n.Memory.WorkingSetBytes
	})
	t.Logf("node %s: processor time %d ns, working set %d bytes, committed %d bytes", s.Node.NodeName,
		*s.Node.CPU.UsageCoreNanoSeconds, *s.Node.Memory.WorkingSetBytes, *s.Node.Memory.UsageBytes)
	if s.Node.NodeName != "winnode-kubelet" {
		t.Errorf("the summary's node is %q, want --node-name's winnode-kubelet", s.Node.NodeName)
	}

	// down ends kubelet.exe with the node's other processes and leaves nothing.
	b, err := os.ReadFile(kubeletAgent.pidFile(root))
	if err != nil {
		t.Fatal(err)
	}
	winnode("down", "--root", root)
	var pid int
	fmt.Sscan(string(b), &pid)
	if rootdir.Running(pid) {
		t.Errorf("kubelet.exe (pid %d) still runs after down", pid)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the node's folder after down: %v", err)
	}
}

// waitUntil polls cond every second until it holds, failing the test after bound (a guard
// against hangs, far above what a slow machine needs).
func waitUntil(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(time.Second)
	}
}
