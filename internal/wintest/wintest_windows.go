package wintest

import (
	"net"
	"testing"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// UnderWine reports whether this process runs under Wine, whose ntdll exports wine_get_version
// (https://wiki.winehq.org/Developer_FAQ); Windows' does not.
func UnderWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// ListenPipe serves the named pipe name until the test ends, as containerd's Windows client
// serves each stdio stream (pkg/cio listens with go-winio and the shim dials). Under Wine its
// first client needs hack/wine/winepipe.c (TestPipeFirstClient), which every Go program there
// loads.
func ListenPipe(t testing.TB, name string) net.Listener {
	t.Helper()
	l, err := winio.ListenPipe(name, nil)
	if err != nil {
		t.Fatalf("listen on %s: %v", name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
