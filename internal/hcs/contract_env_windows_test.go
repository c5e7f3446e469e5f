package hcs

import (
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/testenv"
)

// The contract suite's environment on Windows, as `make test-windows` provides it under Wine:
// the real computecore bindings load hack/wine's stand-in computecore.dll, which forwards every
// call to an hcsemu that test.sh started on Linux and serves on loopback TCP
// (HCSEMU_TCP_ADDRESS); RUNHCS_WINE_IMAGE is the test image folder, a Linux path that hcsemu
// resolves. On a real Windows host the suite would need a mounted container volume and a
// Windows build of the workload instead; it does not provision those yet.
type contractEnv struct {
	hcs   *Client // this test's, made by requireContract
	addr  string
	image string
}

func requireContract(t *testing.T) *contractEnv {
	t.Helper()
	env := &contractEnv{addr: os.Getenv("HCSEMU_TCP_ADDRESS"), image: os.Getenv("RUNHCS_WINE_IMAGE")}
	if env.addr == "" || env.image == "" {
		if testenv.InCI() {
			t.Fatal("HCSEMU_TCP_ADDRESS and RUNHCS_WINE_IMAGE are not set: run the suite through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows starts hcsemu and sets HCSEMU_TCP_ADDRESS and RUNHCS_WINE_IMAGE when run as root")
	}
	// The stand-in DLL keeps one connection per process; a fresh Client per test is a fresh
	// set of handles on it.
	env.hcs = NewHostClient()
	return env
}

// hostDir makes a host folder for a mapped directory. hcsemu runs on Linux and takes a Linux
// host path, while this test runs under Wine, which shows the Linux root as drive Z: (Wine's
// default dosdevices mapping). So the folder is made under the image's parent, a Linux path
// test.sh gives, and the test reaches it through Z:.
func (env *contractEnv) hostDir(t *testing.T) (local, host string) {
	t.Helper()
	host = path.Join(path.Dir(filepath.ToSlash(env.image)), "mapped-"+t.Name())
	local = `Z:` + filepath.FromSlash(host)
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatalf("host folder for a mapped directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(local) })
	return local, host
}
