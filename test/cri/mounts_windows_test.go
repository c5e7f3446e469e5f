//go:build windows

package cri

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestVolumeMounts mounts two host folders into a process-isolated container as kubelet does
// for hostPath and emptyDir volumes (CRI Mount{HostPath, ContainerPath, Readonly}, HostPath a
// Windows path on the node): the container reads a file from each, writes one to the
// read-write folder, which the host sees, and cannot write to the read-only one. Under Wine the
// host paths are the prefix's (C:\…), which hcsemu resolves through the shim's drive mapping
// (hack/wine/README.md, "Host paths in HCS documents").
func TestVolumeMounts(t *testing.T) {
	n := connect(t)
	rw, ro := t.TempDir(), t.TempDir()
	if !strings.HasPrefix(strings.ToUpper(rw), `C:\`) {
		t.Fatalf("host folder %q: want a path on the node's drive C:", rw)
	}
	for dir, content := range map[string]string{rw: "from-the-rw-folder", ro: "from-the-ro-folder"} {
		if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod, podCfg := runPod(t, n, "pod-mounts")
	cfg := containerConfig("mounts", "sleep", "600")
	cfg.Mounts = []*runtimeapi.Mount{
		{HostPath: rw, ContainerPath: `C:\rw`},
		{HostPath: ro, ContainerPath: `C:\ro`, Readonly: true},
	}
	id := startContainer(t, n, pod, podCfg, cfg)
	for file, want := range map[string]string{`C:\rw\in.txt`: "from-the-rw-folder", `C:\ro\in.txt`: "from-the-ro-folder"} {
		stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "read", file}, time.Minute)
		if err != nil || string(stdout) != want {
			t.Errorf("read %s: stdout %q, stderr %q, %v; want %q", file, stdout, stderr, err, want)
		}
	}
	if _, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "write", `C:\rw\out.txt`, "from-the-container"}, time.Minute); err != nil {
		t.Fatalf("write to the read-write mount: %v (stderr %q)", err, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "from-the-container" {
		t.Errorf("the container's file in the host folder %s: %q, %v", rw, b, err)
	}
	_, _, err := n.rt.ExecSync(ctx(t), id, []string{workload, "write", `C:\ro\out.txt`, "refused"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 {
		t.Errorf("write to the read-only mount: %v; want a failing exit", err)
	}
	if _, err := os.Stat(filepath.Join(ro, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the read-only host folder holds the container's file: %v", err)
	}
}
