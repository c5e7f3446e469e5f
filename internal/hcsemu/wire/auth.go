package wire

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// The TCP transport's authentication (see doc.go): the unix socket is guarded by its file's
// permissions and the peer's uid, but anyone on the machine can open a loopback port, and
// whoever talks to hcsemu runs programs as root. So every TCP connection starts with the
// daemon's key, which only those who can read its key file know.

// MethodAuthenticate is the first frame of every connection on the TCP transport, control and
// stdio connections alike, with AuthenticateArgs. The daemon answers a right key with a
// response that carries the request's id and nothing else, and then reads the connection's
// next frame as the first of an unauthenticated connection was read before (a request, or
// AttachStdio). Anything else gets no answer: the daemon closes the connection.
const MethodAuthenticate = "Authenticate"

// AuthenticateArgs are the args of MethodAuthenticate: Key is the content of the daemon's key
// file (hcsemu --tcp-key-file), without surrounding white space.
type AuthenticateArgs struct {
	Key string `json:"key"`
}

// KeyFileEnv names the environment variable that gives clients of the TCP transport the path
// of the daemon's key file (hack/wine's stand-in DLLs read it at every dial).
const KeyFileEnv = "HCSEMU_TCP_KEY_FILE"

// MaxAuthenticateFrame bounds the first frame of a TCP connection, which the daemon reads
// before it knows who sent it: a stranger cannot make it allocate more than this.
const MaxAuthenticateFrame = 1 << 10

// ReadKeyFile returns the key in a key file, without surrounding white space.
func ReadKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the hcsemu TCP key: %w", err)
	}
	key := string(bytes.TrimSpace(b))
	if key == "" {
		return "", fmt.Errorf("read the hcsemu TCP key: %s is empty", path)
	}
	return key, nil
}

// Authenticate is a client's side of the handshake on a new TCP connection: it sends key and
// waits for the daemon's acknowledgement. A refused key ends in the connection's close, which
// this reports naming the key as the likely reason.
func Authenticate(rw io.ReadWriter, key string) error {
	const id = 1
	f, err := NewRequest(id, MethodAuthenticate, AuthenticateArgs{Key: key})
	if err != nil {
		return err
	}
	if err := WriteFrame(rw, f); err != nil {
		return fmt.Errorf("authenticate to hcsemu: %w", err)
	}
	ack, err := ReadFrame(rw)
	if err != nil {
		return fmt.Errorf("authenticate to hcsemu: no acknowledgement (a wrong or stale key closes the connection): %w", err)
	}
	if ack.ID != id || ack.HResult != 0 || ack.Event != nil || ack.Method != "" {
		return fmt.Errorf("authenticate to hcsemu: unexpected answer (id %d, hresult %#x)", ack.ID, uint32(ack.HResult))
	}
	return nil
}
