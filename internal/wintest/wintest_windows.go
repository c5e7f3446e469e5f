package wintest

import (
	"net"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// UnderWine reports whether this process runs under Wine, whose ntdll exports wine_get_version
// (https://wiki.winehq.org/Developer_FAQ); Windows' does not.
func UnderWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// ListenPipe serves the named pipe name until the test ends, as containerd's Windows client
// serves each stdio stream (pkg/cio listens with go-winio and the shim dials).
//
// Under Wine 8, go-winio's first pipe instance is not kept "initially disconnected", so the
// first real client lands on it and hangs (cf. go-winio issues 173 and 313); opening and closing
// one dummy client right after ListenPipe clears that, and the dummy never reaches Accept.
// Windows needs no such thing, so it is done under Wine only.
func ListenPipe(t testing.TB, name string) net.Listener {
	t.Helper()
	l, err := winio.ListenPipe(name, nil)
	if err != nil {
		t.Fatalf("listen on %s: %v", name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if UnderWine() {
		short := 5 * time.Second
		c, err := winio.DialPipe(name, &short)
		if err != nil {
			t.Fatalf("dummy client of %s (the Wine work-around): %v", name, err)
		}
		_ = c.Close()
	}
	return l
}
