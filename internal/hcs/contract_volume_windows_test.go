package hcs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Microsoft/hcsshim"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// TestContractVolumeWindows runs a container on a volume that vmcompute's layer functions
// mounted, as a Windows node does: the layers are made and mounted through hcsshim's
// ProcessBaseLayer, CreateScratchLayer, ActivateLayer, PrepareLayer and GetLayerMountPath
// (the stand-in vmcompute.dll and hcsemu's storage filter under Wine), and the container
// document names the \\?\Volume{GUID}\ path they return as Container.Storage.Path.
func TestContractVolumeWindows(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)
	root := t.TempDir()
	di := hcsshim.DriverInfo{HomeDir: root}
	base := filepath.Join(root, "base")
	exe := filepath.Join(base, "Files", "workload", "workload.exe")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	// The Linux workload of the test image (hcsemu runs processes on Linux), through Z:.
	src, err := os.Open(`Z:` + filepath.FromSlash(filepath.ToSlash(env.image)) + `\workload\workload.exe`)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(exe)
	if err == nil {
		_, err = io.Copy(dst, src)
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
	}
	src.Close()
	if err != nil {
		t.Fatalf("copying the workload into the base layer: %v", err)
	}
	if err := hcsshim.ProcessBaseLayer(base); err != nil {
		t.Fatalf("ProcessBaseLayer: %v", err)
	}
	parents := []string{base}
	if err := hcsshim.CreateScratchLayer(di, "scratch", "", parents); err != nil {
		t.Fatalf("CreateScratchLayer: %v", err)
	}
	if err := hcsshim.ActivateLayer(di, "scratch"); err != nil {
		t.Fatalf("ActivateLayer: %v", err)
	}
	if err := hcsshim.PrepareLayer(di, "scratch", parents); err != nil {
		hcsshim.DeactivateLayer(di, "scratch")
		t.Fatalf("PrepareLayer: %v", err)
	}
	t.Cleanup(func() {
		if err := hcsshim.UnprepareLayer(di, "scratch"); err != nil {
			t.Errorf("UnprepareLayer: %v", err)
		}
		if err := hcsshim.DeactivateLayer(di, "scratch"); err != nil {
			t.Errorf("DeactivateLayer: %v", err)
		}
		if err := hcsshim.DestroyLayer(di, "scratch"); err != nil {
			t.Errorf("DestroyLayer: %v", err)
		}
	})
	vol, err := hcsshim.GetLayerMountPath(di, "scratch")
	if err != nil || !strings.HasPrefix(vol, `\\?\Volume{`) {
		t.Fatalf("GetLayerMountPath = %q, %v; want a volume path", vol, err)
	}

	s, err := env.hcs.CreateComputeSystem(ctx, testID(t), containerDoc(vol))
	if err != nil {
		t.Fatalf("CreateComputeSystem on %s: %v", vol, err)
	}
	defer s.Close()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	p := run(t, s, &schema2.ProcessParameters{CommandLine: workload("write", `C:\data\out.txt`, "on-the-volume"), CreateStdOutPipe: true, CreateStdErrPipe: true})
	_, out, errOut := p.Stdio()
	stdout, stderr := readAll(t, out, 30*time.Second), readAll(t, errOut, 30*time.Second)
	if code := waitExit(t, p, 30*time.Second); code != 0 {
		t.Fatalf("workload write: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// The container stops with its last process; what it wrote is on the volume, which this
	// process reads by its volume path.
	if b, err := os.ReadFile(vol + `data\out.txt`); err != nil || string(b) != "on-the-volume" {
		t.Errorf("reading the container's file through %s: %q, %v", vol, b, err)
	}
	if _, err := os.Stat(filepath.Join(base, "Files", "data", "out.txt")); err == nil {
		t.Error("the container's write reached the base layer")
	}
	if err := s.Terminate(ctx); err != nil && !errors.Is(err, ErrAlreadyStopped) {
		t.Errorf("Terminate: %v", err)
	}
}
