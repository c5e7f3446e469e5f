//go:build !windows

package shim

import (
	"os"
	"path/filepath"
	"testing"
)

// clientStdin is containerd's client side of a process's stdin holding data that the client
// wrote and then closed. A regular file stands in for the FIFO: the shim opens it as it opens
// a FIFO, and it reads to end of file like a FIFO whose writer closed.
func clientStdin(t *testing.T, dir, data string) string {
	t.Helper()
	p := filepath.Join(dir, "stdin")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
