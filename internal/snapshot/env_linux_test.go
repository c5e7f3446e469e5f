package snapshot

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/wclayer"

	"github.com/openhcs/runhcs/internal/testenv"
)

// testLayers is what the package's tests run over on Linux: the emulator's folders and overlayfs.
var testLayers = wclayer.New()

// requireRoot skips tests that import or mount layers (trusted.* xattrs, whiteout device
// nodes, overlayfs) when not root, unless CI=true, where they must run.
func requireRoot(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "trusted.* xattrs, mknod, mount")
}

// testListener is where TestGRPC serves: a unix socket, as containerd's proxy_plugins reach the
// snapshotter on Linux. It returns the listener and the gRPC target that dials it.
func testListener(t *testing.T) (net.Listener, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "wcow.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return l, "unix://" + sock
}

// makeUVMBase gives the committed base layer folder base what a utility VM scratch needs: under
// the emulator, a UtilityVM folder with its Files.
func makeUVMBase(t *testing.T, base string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(base, wclayer.UtilityVMDir, wclayer.FilesDir), 0o755); err != nil {
		t.Fatal(err)
	}
}

// checkUVMScratch checks the utility VM scratch of the snapshot folder dir over the base layer
// folder base: under the emulator a scratch layer vm/ (an empty Files/, the overlayfs upper
// directory) over the base layer's UtilityVM folder.
func checkUVMScratch(t *testing.T, dir, base string) {
	t.Helper()
	vm := filepath.Join(dir, UVMScratchDir)
	if fi, err := os.Stat(wclayer.FilesPath(vm)); err != nil || !fi.IsDir() {
		t.Fatalf("no utility VM scratch folder %s: %v", wclayer.FilesPath(vm), err)
	}
	checkScratchDisk(t, vm)
	chain, err := wclayer.ReadLayerChain(vm)
	if want := []string{filepath.Join(base, wclayer.UtilityVMDir)}; err != nil || !reflect.DeepEqual(chain, want) {
		t.Fatalf("utility VM scratch's layer chain = %v, %v; want %v", chain, err, want)
	}
}

// checkScratchDisk checks the emulated sandbox.vhdx of the scratch folder dir: hcsemu's format,
// with the folder itself as its file system, so a utility VM mounting the disk sees its Files/.
func checkScratchDisk(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, emulatedScratchDisk)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("no scratch disk: %v", err)
	}
	var h emuvhdx.Header
	if err := json.Unmarshal(b, &h); err != nil || h.Format != emuvhdx.Format || h.VirtualSize == 0 {
		t.Fatalf("%s = %s, %v: not an emulated VHDX", p, b, err)
	}
	if fs, err := h.FileSystemDir(p); err != nil || fs != dir {
		t.Fatalf("file system of %s = %q, %v; want the folder %s", p, fs, err, dir)
	}
}
