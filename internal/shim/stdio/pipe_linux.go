package stdio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/containerd/fifo"
)

// openPipe opens a FIFO that containerd's client created, as containerd's runc shim does
// (cmd/containerd-shim-runc-v2/process/io.go, copyPipes):
//
//   - an output is opened write-only, which waits (bounded by ctx) until the client has opened
//     its reader. Writing before that and closing would lose the output: a FIFO's buffer is
//     discarded when its last descriptor closes. Then it is opened read-only as well, so that a
//     client that detaches does not make the process's writes fail with EPIPE.
//   - stdin is opened read-only in the background (the client may open its writer later, or
//     never); it does not depend on ctx, which may be a request's.
func openPipe(ctx context.Context, path string, write bool) (io.ReadWriteCloser, error) {
	if !write {
		f, err := fifo.OpenFifo(context.WithoutCancel(ctx), path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, fmt.Errorf("open fifo %q: %w", path, err)
		}
		return f, nil
	}
	w, err := fifo.OpenFifo(ctx, path, syscall.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open fifo %q for writing (waiting for containerd's client to read it): %w", path, err)
	}
	r, err := fifo.OpenFifo(ctx, path, syscall.O_RDONLY, 0)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open fifo %q: %w", path, err)
	}
	return &heldFIFO{ReadWriteCloser: w, reader: r}, nil
}

// heldFIFO is the write side of an output FIFO with the read side the shim holds.
type heldFIFO struct {
	io.ReadWriteCloser
	reader io.Closer
}

func (h *heldFIFO) Close() error {
	return errors.Join(h.ReadWriteCloser.Close(), h.reader.Close())
}
