package snapshot

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// requireRoot does nothing on Windows: the tests run over folderAPI (layerapi_windows_test.go),
// which needs no privilege, in place of vmcompute.dll and the backup APIs.
func requireRoot(tb testing.TB) { tb.Helper() }

// testListener is where TestGRPC serves: loopback TCP. containerd reaches a proxy plugin on
// Windows over a named pipe, and a unix socket would do on Windows 10 1803 and later, but Wine 8
// has no AF_UNIX sockets (socket() fails with WSAEAFNOSUPPORT); what the test checks, that
// containerd's proxy clients get the snapshotter's mounts and error kinds unchanged over gRPC,
// does not depend on the transport.
func testListener(t *testing.T) (net.Listener, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, l.Addr().String()
}

// uvmTemplate stands in for the differencing disk that importing a base layer makes in its
// UtilityVM folder.
const uvmTemplate = "SystemTemplate.vhdx of the base layer"

// makeUVMBase gives the committed base layer folder base what a utility VM scratch needs on
// Windows: UtilityVM\SystemTemplate.vhdx, which ProcessUtilityVMImage makes at import.
func makeUVMBase(t *testing.T, base string) {
	t.Helper()
	uvm := filepath.Join(base, wclayer.UtilityVMDir)
	if err := os.MkdirAll(uvm, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(uvm, "SystemTemplate.vhdx"), []byte(uvmTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkUVMScratch checks the utility VM scratch of the snapshot folder dir on Windows: as
// containerd's windows snapshotter makes it (createUVMScratchLayer), vm\sandbox.vhdx, a copy
// of the base layer's UtilityVM\SystemTemplate.vhdx, beside the container's own sandbox.vhdx.
func checkUVMScratch(t *testing.T, dir, base string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, UVMScratchDir, wclayer.ScratchVHDX))
	if err != nil || string(b) != uvmTemplate {
		t.Fatalf(`vm\sandbox.vhdx = %q, %v; want a copy of %s`, b, err, filepath.Join(base, wclayer.UtilityVMDir, "SystemTemplate.vhdx"))
	}
	if _, err := os.Stat(filepath.Join(dir, wclayer.ScratchVHDX)); err != nil {
		t.Fatalf("no container scratch beside the utility VM's: %v", err)
	}
}
