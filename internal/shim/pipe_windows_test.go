package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/wintest"
)

// The shim's Windows-only pieces, run for real (under Wine on Linux, see hack/wine).

func TestPipeAddress(t *testing.T) {
	tests := []struct {
		namespace, group, want string
	}{
		{"default", "c1", `\\.\pipe\ProtectedPrefix\Administrators\containerd-shim-default-c1-pipe`},
		{"k8s.io", "0123abcd", `\\.\pipe\ProtectedPrefix\Administrators\containerd-shim-k8s.io-0123abcd-pipe`},
	}
	for _, tc := range tests {
		if got := pipeAddress(tc.namespace, tc.group); got != tc.want {
			t.Errorf("pipeAddress(%q, %q) = %s, want %s (hcsshim's name, docs/architecture.md)", tc.namespace, tc.group, got, tc.want)
		}
	}
}

// clientStdin is containerd's client side of a process's stdin: a named pipe that, once the
// shim connects, carries data and is then closed by the client. The write runs in the
// background: a pipe made with no buffer sizes (as containerd makes it) may accept a write
// only once the shim reads, as under Wine.
func clientStdin(t *testing.T, _, data string) string {
	t.Helper()
	name := fmt.Sprintf(`\\.\pipe\runhcs-test-%d-%s-stdin`, os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	l := wintest.ListenPipe(t, name)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// A failed write shows as what the process read; t.Errorf here could come after the
		// test ended.
		_, _ = c.Write([]byte(data))
	}()
	return name
}

// TestStartJoinsPodShim: a task whose spec names a pod's sandbox gets the pipe of the shim
// already serving that pod, without starting another.
func TestStartJoinsPodShim(t *testing.T) {
	// A namespace of this test's own, so the pipe cannot be one a real shim on this host serves.
	ns := fmt.Sprintf("runhcs-test-%d", os.Getpid())
	podPipe := pipeAddress(ns, "sandbox1")
	l := wintest.ListenPipe(t, podPipe)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()

	bundle := t.TempDir()
	spec, _ := json.Marshal(map[string]any{"annotations": map[string]string{"io.kubernetes.cri.sandbox-id": "sandbox1"}})
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	launches := 0
	ln := launcher{start: func(*exec.Cmd) error { launches++; return errors.New("test: no shim may be started") }}
	got, err := ln.startOrJoin(ctx, startFlags{namespace: ns, id: "app", address: `\\.\pipe\containerd-containerd.ttrpc`}, "")
	if err != nil {
		t.Fatalf("startOrJoin: %v", err)
	}
	if launches != 0 {
		t.Errorf("%d shims started; joining a pod starts none", launches)
	}
	if got != podPipe {
		t.Errorf("address %s, want the pod shim's %s", got, podPipe)
	}
	// containerd finds the shim of a task again (after a restart) through this file.
	if b, err := os.ReadFile(filepath.Join(bundle, "address")); err != nil || string(b) != podPipe {
		t.Errorf("address file holds %q, %v; want %s", b, err, podPipe)
	}
	// Joining is one dial; starting a shim polls for up to 30 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("joining took %v", d)
	}
}
