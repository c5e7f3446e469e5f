package compute

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
)

// TestVMOutOfProcess runs utility VMs in the hcsemu binary (whose VM init is itself,
// re-executed) with the host budget flags, and kills it: everything in its VMs dies with it, and
// the next daemon of the root starts with nothing of them mounted.
func TestVMOutOfProcess(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	bin := hcsemuBinary.build(t)
	addr := filepath.Join(dir, "hcsemu.sock")
	root := filepath.Join(dir, "root")
	start := func() *exec.Cmd {
		d := exec.Command(bin, "--address", addr, "--root", root, "--host-memory-mb", "300", "--host-processors", "1")
		d.Stdout, d.Stderr = os.Stderr, os.Stderr
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dial := func() *client.HCS {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := client.DialHCS(addr); err == nil {
				return c
			} else if time.Now().After(deadline) {
				t.Fatalf("the daemon does not answer: %v", err)
			}
		}
	}
	daemon := start()
	defer func() {
		if daemon != nil {
			daemon.Process.Kill()
			daemon.Wait()
		}
	}()
	b := dial()
	defer b.Close()

	if sp, err := b.GetServiceProperties(`{"PropertyTypes":["ProcessorTopology"]}`); err != nil || !strings.Contains(sp, `"LogicalProcessorCount":1`) {
		t.Errorf("ProcessorTopology %s, %v: want --host-processors 1", sp, err)
	}
	layer := newLayer(t, "10.0.20348.1", true)
	if doc, err := run(t, b, func(op computecore.Operation) error {
		_, err := b.CreateComputeSystem("two@vm", vmDocument(layer, newDisk(t), 128, 2), op, 0)
		return err
	}); !errors.Is(err, computecore.E_INVALIDARG) || !strings.Contains(doc, "Processor.Count: 2") {
		t.Errorf("a VM of 2 processors on a host of 1: %v %s, want E_INVALIDARG naming Processor.Count", err, doc)
	}
	mustRun(t, b, "create", func(op computecore.Operation) error {
		_, err := b.CreateComputeSystem("big@vm", vmDocument(layer, newDisk(t), 400, 1), op, 0)
		return err
	})
	big, err := b.OpenComputeSystem("big@vm", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, b, func(op computecore.Operation) error { return b.StartComputeSystem(big, op, "") }); !errors.Is(err, computecore.E_OUTOFMEMORY) {
		t.Errorf("a 400 MB VM on a 300 MB host: %v, want E_OUTOFMEMORY", err)
	}
	mustRun(t, b, "create", func(op computecore.Operation) error {
		_, err := b.CreateComputeSystem("v@vm", vmDocument(layer, newDisk(t), 128, 1), op, 0)
		return err
	})
	vm, err := b.OpenComputeSystem("v@vm", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "start", func(op computecore.Operation) error { return b.StartComputeSystem(vm, op, "") })
	s := mustStart(t, b, vm, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 600`})

	daemon.Process.Signal(syscall.SIGKILL)
	daemon.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(int(s.pid), 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(int(s.pid), 0) == nil {
		t.Errorf("process %d in the VM outlived the killed daemon", s.pid)
	}

	daemon = start()
	c2 := dial()
	defer c2.Close()
	// The socket listens before the engine exists (internal/hcsemu's Run); an answer means
	// the engine, and its cleanup of the dead daemon's VMs, is done.
	if _, err := c2.GetServiceProperties(""); err != nil {
		t.Fatalf("the second daemon does not answer: %v", err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), filepath.Join(root, "vms")) {
		t.Errorf("the new daemon left the dead one's VM mounts:\n%s", mounts)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v", err)
	}
	daemon = nil
}
