package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hcsemu/wire/wiretest"
	"github.com/openhcs/runhcs/internal/testenv"
)

// The gate (gate_linux.go): nothing is served to a connection that has not shown it belongs.

// frameBytes is one frame as a client would write it, length prefix included.
func frameBytes(t *testing.T, method string, args any) []byte {
	t.Helper()
	f, err := wire.NewRequest(1, method, args)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := wire.WriteFrame(&b, f); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// closedUnread reads c until the daemon closes it and returns what it read. A reset counts as
// the close: the daemon closes a refused connection without reading what else it was sent.
func closedUnread(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read: %v, want the daemon's close", err)
	}
	return string(b)
}

// TestTCPGate: a TCP connection without the daemon's key is closed without a byte served and
// takes nothing: not the stream whose token it names, not an answer to a request. The server
// here has no engine, so a request that got past the gate would crash the test.
func TestTCPGate(t *testing.T) {
	s, addr := serveStdio(t, AttachTimeout)
	r, w := pipe(t)
	token, err := s.stdio.add(context.Background(), wire.ProcessReply{PID: 3, Stdio: [3]bool{false, true, false}}, []*os.File{r})
	if err != nil {
		t.Fatal(err)
	}
	attach := frameBytes(t, wire.MethodAttachStdio, wire.AttachStdioArgs{Token: token, Slot: wire.StdOut})
	request := frameBytes(t, wire.MethodGetServiceProperties, wire.QueryArgs{})
	otherKey, err := NewTCPKey()
	if err != nil {
		t.Fatal(err)
	}
	auth := func(key string) []byte {
		return frameBytes(t, wire.MethodAuthenticate, wire.AuthenticateArgs{Key: key})
	}
	cat := func(parts ...[]byte) []byte { return []byte(string(parts[0]) + string(parts[1])) }
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"no key, attach with the right token", attach},
		{"no key, a request", request},
		{"another daemon's key, then attach", cat(auth(otherKey), attach)},
		{"wrong key, then a request", cat(auth(otherKey), request)},
		{"the key less its last digit", cat(auth(testKey[:len(testKey)-1]), attach)},
		{"the key and one digit more", cat(auth(testKey+"0"), attach)},
		{"the key in upper case", cat(auth(strings.ToUpper(testKey)), attach)},
		{"empty key", cat(auth(""), attach)},
		{"the key with an unknown field", cat(frameBytes(t, wire.MethodAuthenticate, map[string]string{"key": testKey, "user": "root"}), attach)},
		{"the key under another method", cat(frameBytes(t, wire.MethodAttachStdio, wire.AuthenticateArgs{Key: testKey}), attach)},
		{"a first frame larger than an Authenticate", binary.BigEndian.AppendUint32(nil, wire.MaxAuthenticateFrame+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if got := closedUnread(t, c); got != "" {
				t.Errorf("read %q, want the connection closed without a byte", got)
			}
		})
	}
	// None took the stream: it still flows to an authenticated attach.
	c := wiretest.AttachStdio(t, addr, testKey, token, wire.StdOut)
	io.WriteString(w, "still here")
	w.Close()
	if got := readAllWithin(t, "stdout", c, 10*time.Second); got != "still here" {
		t.Errorf("stdout carried %q after the refused connections", got)
	}
}

// TestTCPGateSilence: a connection that sends nothing is closed once the time to authenticate
// is up, so strangers cannot hold the daemon's goroutines by connecting.
func TestTCPGateSilence(t *testing.T) {
	defer func(d time.Duration) { authTimeout = d }(authTimeout)
	authTimeout = 200 * time.Millisecond
	_, addr := serveStdio(t, AttachTimeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := closedUnread(t, c); got != "" {
		t.Errorf("read %q", got)
	}
}

// TestServeTCPNeedsKey: TCP is never served without a key.
func TestServeTCPNeedsKey(t *testing.T) {
	ln, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := &Server{stdio: newStdioTable(AttachTimeout)}
	if err := s.ServeTCP(context.Background(), ln, ""); err == nil || !strings.Contains(err.Error(), "--tcp-key-file") {
		t.Errorf("ServeTCP without a key: %v, want an error naming --tcp-key-file", err)
	}
}

// gateHelperEnv makes the test binary, run as another user by TestGateOtherUser, try the
// daemon's doors (TestGateHelper) instead of running tests.
const gateHelperEnv = "HCSEMU_GATE_HELPER"

// TestGateOtherUser: a user other than the daemon's (nobody) gets nothing on either transport:
// not through the unix socket (its mode, and the peer uid check when the mode is loosened),
// not the key file, and not TCP with no key or a guessed one. Each step is tried by the test
// binary itself, run as nobody.
func TestGateOtherUser(t *testing.T) {
	testenv.RequireRoot(t, "run a helper as user nobody")
	d := startServer(t)
	// Folders nobody can traverse, so that what refuses is what is tested: the socket's and
	// the key file's own modes, the peer check and the key.
	pub, err := os.MkdirTemp("", "hcsemu-gate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	keyFile := filepath.Join(pub, "key")
	if err := WriteTCPKeyFile(keyFile, testKey); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(pub, "hcsemu.test")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pub, filepath.Dir(d.addr), filepath.Dir(filepath.Dir(d.addr))} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	asNobody := func(t *testing.T, steps ...string) map[string]string {
		t.Helper()
		cmd := exec.Command(helper, "-test.run=^TestGateHelper$", "-test.v")
		cmd.Env = append(os.Environ(), gateHelperEnv+"="+strings.Join(steps, ","),
			"HCSEMU_GATE_UNIX="+d.addr, "HCSEMU_GATE_TCP="+d.tcpAddr, "HCSEMU_GATE_KEY="+keyFile)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as nobody: %v\n%s", err, out)
		}
		got := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if step, result, ok := strings.Cut(sc.Text(), "=> "); ok {
				got[strings.TrimSpace(step)] = result
			}
		}
		return got
	}
	got := asNobody(t, "unix", "keyfile", "tcp-nokey", "tcp-guessed", "tcp-nokey-attach")
	want := map[string]string{
		"unix":             "refused: permission denied",
		"keyfile":          "refused: permission denied",
		"tcp-nokey":        "closed without an answer",
		"tcp-guessed":      "closed without an answer",
		"tcp-nokey-attach": "closed without an answer",
	}
	for step, w := range want {
		if got[step] != w {
			t.Errorf("as nobody, %s: %q, want %q", step, got[step], w)
		}
	}
	// A socket whose mode was loosened still serves only the daemon's uid.
	if err := os.Chmod(d.addr, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := asNobody(t, "unix")["unix"]; got != "closed without an answer" {
		t.Errorf("as nobody, on a socket of mode 0666: %q, want the connection closed without an answer", got)
	}
	// And the daemon's own user is still served on both.
	for _, c := range []net.Conn{wiretest.Dial(t, d.tcpAddr, testKey), dialUnix(t, d.addr)} {
		if f := callOnce(t, c, wire.MethodGetServiceProperties, wire.QueryArgs{}); f.HResult != 0 {
			t.Errorf("the daemon's user on %s: hresult %#x: %s", c.RemoteAddr().Network(), uint32(f.HResult), f.Result)
		}
	}
}

// dialUnix connects to the unix socket at addr.
func dialUnix(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// callOnce sends one request on c and returns its response (the transports' frames are the
// same; a unix client receives no descriptors for this one).
func callOnce(t *testing.T, c net.Conn, method string, args any) *wire.Frame {
	t.Helper()
	req, err := wire.NewRequest(1, method, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteFrame(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := wire.ReadFrame(bufio.NewReader(c))
	if err != nil {
		t.Fatalf("read the answer to %s: %v", method, err)
	}
	return f
}

// TestGateHelper is TestGateOtherUser's helper: run as nobody, it tries each step it is given
// and prints "step => result". Run directly, it does nothing.
func TestGateHelper(t *testing.T) {
	steps := os.Getenv(gateHelperEnv)
	if steps == "" {
		t.Skip("a helper of TestGateOtherUser")
	}
	request := frameBytes(t, wire.MethodGetServiceProperties, wire.QueryArgs{})
	// answered reports what the daemon does with bytes sent on c.
	answered := func(c net.Conn, b []byte) string {
		defer c.Close()
		closed := func(err error) bool {
			return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
		}
		// The daemon may refuse before the write: its close then fails the write.
		if _, err := c.Write(b); closed(err) {
			return "closed without an answer"
		} else if err != nil {
			return "write: " + err.Error()
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(make([]byte, 1))
		switch {
		case n > 0:
			return "answered"
		case closed(err):
			return "closed without an answer"
		default:
			return "read: " + err.Error()
		}
	}
	tcp := func(b []byte) string {
		c, err := net.Dial("tcp", os.Getenv("HCSEMU_GATE_TCP"))
		if err != nil {
			return "dial: " + err.Error()
		}
		return answered(c, b)
	}
	for _, step := range strings.Split(steps, ",") {
		var result string
		switch step {
		case "unix":
			c, err := net.Dial("unix", os.Getenv("HCSEMU_GATE_UNIX"))
			if errors.Is(err, syscall.EACCES) {
				result = "refused: permission denied"
			} else if err != nil {
				result = "dial: " + err.Error()
			} else {
				// The unix transport's frames are the TCP ones with no descriptors.
				result = answered(c, request)
			}
		case "keyfile":
			if _, err := wire.ReadKeyFile(os.Getenv("HCSEMU_GATE_KEY")); errors.Is(err, os.ErrPermission) {
				result = "refused: permission denied"
			} else {
				result = fmt.Sprintf("read: %v", err)
			}
		case "tcp-nokey":
			result = tcp(request)
		case "tcp-guessed":
			key, _ := NewTCPKey()
			result = tcp(append(frameBytes(t, wire.MethodAuthenticate, wire.AuthenticateArgs{Key: key}), request...))
		case "tcp-nokey-attach":
			result = tcp(frameBytes(t, wire.MethodAttachStdio, wire.AttachStdioArgs{Token: "guessed", Slot: wire.StdOut}))
		default:
			result = "unknown step"
		}
		fmt.Printf("%s => %s\n", step, result)
	}
}
