package hns

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/Microsoft/hcsshim"
	"golang.org/x/sys/windows"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/testenv"
)

// TestHcsshimV1ComputeSystem drives the HCS v1 functions of vmcompute.dll that hcsshim's
// HotAttachEndpoint goes through (its OpenContainer, Close; hcsshim's internal/hcs under
// them), against the stand-in vmcompute.dll and hcsemu: a container that does not exist is
// hcsshim's IsNotExist (vmcompute's 0xC037010E), an open container's exit reaches hcsshim
// through the v1 callback (its Wait returns), and a handle the DLL did not give is refused.
func TestHcsshimV1ComputeSystem(t *testing.T) {
	requireContract(t)
	image := os.Getenv("RUNHCS_WINE_IMAGE")
	if image == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_IMAGE is not set: run the test through make test-windows as root")
		}
		t.Skip("no test image: make test-windows sets RUNHCS_WINE_IMAGE when run as root")
	}

	if _, err := hcsshim.OpenContainer("hcsv1-missing"); !hcsshim.IsNotExist(err) {
		t.Errorf("OpenContainer of a missing container: %v; want IsNotExist", err)
	}

	hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v := schema2.SchemaV21
	s, err := hcs.NewHostClient().CreateComputeSystem(hctx, "hcsv1-container", &schema2.ComputeSystem{
		Owner: "hcsv1", SchemaVersion: &v, Container: &schema2.Container{Storage: &schema2.Storage{Path: image}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Terminate(ctx); err != nil && !errors.Is(err, hcs.ErrAlreadyStopped) && !errors.Is(err, hcs.ErrNotFound) {
			t.Errorf("cleanup: terminate: %v", err)
		}
		s.Close()
	})
	if err := s.Start(hctx); err != nil {
		t.Fatal(err)
	}

	c, err := hcsshim.OpenContainer("hcsv1-container")
	if err != nil {
		t.Fatalf("OpenContainer: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	if err := s.Terminate(hctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		// A forced exit is not an unexpected one: Wait reports no error.
		if err != nil {
			t.Errorf("hcsshim's Wait after the container was terminated: %v", err)
		}
	case <-hctx.Done():
		t.Fatal("hcsshim's Wait did not return after the container was terminated: no SystemExited through the v1 callback")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// A handle the DLL did not give out.
	dll := windows.NewLazySystemDLL("vmcompute.dll")
	var result *uint16
	cfg, _ := syscall.UTF16PtrFromString(`{}`)
	r, _, _ := dll.NewProc("HcsModifyComputeSystem").Call(0x1234, uintptr(unsafe.Pointer(cfg)), uintptr(unsafe.Pointer(&result)))
	if uint32(r) != 0x80070006 {
		t.Errorf("HcsModifyComputeSystem with a handle the DLL did not give: %#x; want E_HANDLE", uint32(r))
	}
	r, _, _ = dll.NewProc("HcsUnregisterComputeSystemCallback").Call(0x1234)
	if uint32(r) != 0x80070006 {
		t.Errorf("HcsUnregisterComputeSystemCallback with a handle the DLL did not give: %#x; want E_HANDLE", uint32(r))
	}
}
