package stdio

import (
	"context"
	"fmt"
	"io"
	"time"

	winio "github.com/Microsoft/go-winio"
)

// openPipe dials a named pipe that containerd's client serves (\\.\pipe\...), as hcsshim does:
// on Windows the client is the pipe server and the shim connects to it.
func openPipe(ctx context.Context, path string, _ bool) (io.ReadWriteCloser, error) {
	timeout := 30 * time.Second
	c, err := winio.DialPipe(path, &timeout)
	if err != nil {
		return nil, fmt.Errorf("dial pipe %q: %w", path, err)
	}
	return c, nil
}
