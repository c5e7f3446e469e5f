package wintest

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/windows"
)

// TestAFUnix: AF_UNIX stream sockets as Windows (10 1803 and later) has them and kubelet's
// device plugin manager uses them: net.Listen("unix") makes a file at the path and gives the
// path as its address; a second listener on the path fails; clients dial the path, exchange
// bytes both ways and see the path as the remote address, while the accepted side sees its own
// path and an unnamed peer (Go shows it as "@"); dialling a missing path or a plain file fails; closing the listener
// removes its file (Go's UnixListener unlinks it). Under Wine 8, which has no AF_UNIX,
// hack/wine/winesock.c provides them.
func TestAFUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("net.Listen(unix, %s): %v", path, err)
	}
	defer l.Close()
	if got := l.Addr().String(); got != path {
		t.Errorf("listener address %q, want %q", got, path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no file at the bound path: %v", err)
	}
	if l2, err := net.Listen("unix", path); err == nil {
		l2.Close()
		t.Errorf("a second net.Listen on %s succeeded; want WSAEADDRINUSE", path)
	} else if !errors.Is(err, windows.WSAEADDRINUSE) {
		t.Errorf("a second net.Listen on %s: %v; want WSAEADDRINUSE", path, err)
	}

	const clients = 8
	var wg sync.WaitGroup
	serverErr := make(chan error, clients)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < clients; i++ {
			c, err := l.Accept()
			if err != nil {
				serverErr <- err
				return
			}
			wg.Add(1)
			go func(c net.Conn) {
				defer wg.Done()
				defer c.Close()
				if a, ok := c.LocalAddr().(*net.UnixAddr); !ok || a.Name != path {
					serverErr <- errors.New("accepted connection's local address is " + addrString(c.LocalAddr()) + ", want " + path)
				}
				// Unnamed: Go's RawSockaddrAny.Sockaddr shows an empty path as "@".
				if a, ok := c.RemoteAddr().(*net.UnixAddr); !ok || (a.Name != "" && a.Name != "@") {
					serverErr <- errors.New("accepted connection's peer is " + addrString(c.RemoteAddr()) + ", want unnamed")
				}
				// Echo with a prefix, so that what comes back proves the server read it.
				b := make([]byte, 64)
				n, err := c.Read(b)
				if err != nil {
					serverErr <- err
					return
				}
				if _, err := c.Write(append([]byte("echo:"), b[:n]...)); err != nil {
					serverErr <- err
				}
			}(c)
		}
	}()

	var cwg sync.WaitGroup
	for i := 0; i < clients; i++ {
		cwg.Add(1)
		go func(i int) {
			defer cwg.Done()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Errorf("client %d: net.Dial(unix, %s): %v", i, path, err)
				return
			}
			defer c.Close()
			if a, ok := c.RemoteAddr().(*net.UnixAddr); !ok || a.Name != path {
				t.Errorf("client %d: remote address %s, want %s", i, addrString(c.RemoteAddr()), path)
			}
			msg := []byte{'m', byte('a' + i)}
			if _, err := c.Write(msg); err != nil {
				t.Errorf("client %d: write: %v", i, err)
				return
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "echo:"+string(msg) {
				t.Errorf("client %d: read %q, %v; want %q", i, got, err, "echo:"+string(msg))
			}
		}(i)
	}
	cwg.Wait()
	wg.Wait()
	close(serverErr)
	for err := range serverErr {
		t.Error(err)
	}

	if _, err := net.Dial("unix", filepath.Join(dir, "missing.sock")); err == nil {
		t.Error("net.Dial of a path nobody bound succeeded")
	}
	plain := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(plain, []byte("not a socket"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", plain); err == nil {
		t.Error("net.Dial of a plain file succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("closing the listener: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket file is still there after the listener closed: %v", err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Error("net.Dial after the listener closed succeeded")
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return "<nil>"
	}
	return a.Network() + ":" + a.String()
}
