package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The gate: whoever talks to hcsemu runs programs as root and maps host folders into them, so
// every connection, on every transport, passes admit before anything it sends is served. It is
// the one place that decides; serve (server_linux.go), the accept loop of every transport,
// calls it, and a connection of a kind it does not know is refused.
//
//   - unix socket: the socket file is 0600 (Listen), and the peer's uid (SO_PEERCRED) must be
//     the daemon's own, which also holds if the file's mode or folder is ever loosened;
//   - any byte stream (loopback TCP): the first frame must be wire.MethodAuthenticate with the
//     daemon's key (a fresh random one per daemon, in its --tcp-key-file, 0600), compared in
//     constant time. Loopback is reachable by every user of the machine, so the key is what
//     keeps them out.
//
// A refused connection is logged (who, and why) and closed without a byte sent.

// authTimeout bounds how long a connection may take to authenticate, so that strangers that
// connect and send nothing do not hold the daemon's goroutines.
var authTimeout = 10 * time.Second

// NewTCPKey returns a new key for the TCP transport: 32 random bytes, in hex.
func NewTCPKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the TCP key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteTCPKeyFile writes key to path, readable by the daemon's user only (whatever the umask),
// atomically, so that a client never reads half a key.
func WriteTCPKeyFile(path, key string) error {
	if err := atomicfile.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("--tcp-key-file: %w", err)
	}
	return nil
}

// admit decides whether nc may be served; a nil error admits it. tcpKey is the key byte-stream
// connections must present ("" refuses them all).
func admit(nc net.Conn, tcpKey string) error {
	switch c := nc.(type) {
	case *net.UnixConn:
		return admitPeer(c)
	case *net.TCPConn:
		return admitKey(c, tcpKey)
	default:
		return fmt.Errorf("a %T connection: no gate for this transport", nc)
	}
}

// admitPeer admits a unix connection from the daemon's own uid.
func admitPeer(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	if own := os.Geteuid(); int(cred.Uid) != own {
		return fmt.Errorf("peer uid %d (pid %d) is not the daemon's uid %d: only it may use the emulator", cred.Uid, cred.Pid, own)
	}
	return nil
}

// admitKey reads the first frame of a byte-stream connection, which must authenticate with
// key, and acknowledges it. It reads nothing past that frame.
func admitKey(nc net.Conn, key string) error {
	if key == "" {
		return errors.New("the daemon has no TCP key, so it admits no TCP connection")
	}
	nc.SetDeadline(time.Now().Add(authTimeout))
	f, err := wire.ReadFrameMax(nc, wire.MaxAuthenticateFrame)
	if err != nil {
		return fmt.Errorf("no %s frame within %s: %w", wire.MethodAuthenticate, authTimeout, err)
	}
	if f.Method != wire.MethodAuthenticate {
		return fmt.Errorf("first frame is %q, not %s with the daemon's key", f.Method, wire.MethodAuthenticate)
	}
	var a wire.AuthenticateArgs
	if err := f.DecodeArgs(&a); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(a.Key), []byte(key)) != 1 {
		return errors.New("wrong key (not the content of this daemon's --tcp-key-file)")
	}
	if err := wire.WriteFrame(nc, &wire.Frame{ID: f.ID}); err != nil {
		return fmt.Errorf("acknowledge: %w", err)
	}
	return nc.SetDeadline(time.Time{})
}

// refuse logs why nc was not admitted and closes it.
func refuse(ctx context.Context, nc net.Conn, why error) {
	log.G(ctx).WithFields(log.Fields{"transport": nc.LocalAddr().Network(), "remote": nc.RemoteAddr().String()}).
		WithError(why).Warn("hcsemu: connection refused")
	nc.Close()
}
