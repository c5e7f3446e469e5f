package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIsShimOf: a shim kill finds a pod's shim by its Windows command line as Wine leaves it in
// /proc/PID/cmdline (observed on the node: NUL-separated arguments, padded with NULs), and
// nothing else: another pod's shim, containerd, a program that only names the shim.
func TestIsShimOf(t *testing.T) {
	const shim = `Z:\tmp\node\bin\containerd-shim-runhcs-v1.exe`
	line := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00\x00\x00") }
	for _, c := range []struct {
		name    string
		cmdline []byte
		want    bool
	}{
		{"the pod's shim", line(shim, "-namespace", "k8s.io", "-id", "pod1", "-address", `\\.\pipe\containerd-containerd`, "-debug"), true},
		{"upper case", line(strings.ToUpper(shim), "-namespace", "k8s.io", "-id", "pod1"), true},
		{"another pod's shim", line(shim, "-namespace", "k8s.io", "-id", "pod10", "-address", "x"), false},
		{"a prefix of the id", line(shim, "-namespace", "k8s.io", "-id", "pod"), false},
		{"containerd", line(`Z:\tmp\node\bin\containerd.exe`, "--config", "c", "-id", "pod1"), false},
		{"names the shim", line("/usr/bin/grep", shim, "-id", "pod1"), false},
		{"no id", line(shim, "-namespace", "k8s.io", "pod1"), false},
		{"empty", nil, false},
	} {
		if got := isShimOf(c.cmdline, "pod1"); got != c.want {
			t.Errorf("%s: isShimOf(%q) = %v, want %v", c.name, c.cmdline, got, c.want)
		}
	}
}

// TestServeShimKills: a request for a pod with no shim is answered with an error naming the pod,
// once, and the server stops when told.
func TestServeShimKills(t *testing.T) {
	root := t.TempDir()
	dir := shimKillDir(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k1.req"), []byte("no-such-pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- serveShimKills(root, stop) }()
	done := filepath.Join(dir, "k1.done")
	var answer []byte
	for answer == nil {
		time.Sleep(10 * time.Millisecond)
		answer, _ = os.ReadFile(done)
	}
	close(stop)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if want := "error: no shim process of pod no-such-pod among the node's processes\n"; string(answer) != want {
		t.Fatalf("answer %q, want %q", answer, want)
	}
}
