//go:build unix

package wire

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// Conn is one end of a daemon connection: whole frames out (safe for concurrent use), frames
// and their descriptors in (one reader at a time).
type Conn struct {
	uc  *net.UnixConn
	wmu sync.Mutex
	fdr *fdReader
	br  *bufio.Reader
}

// NewConn wraps a connected unix stream socket.
func NewConn(uc *net.UnixConn) *Conn {
	fdr := &fdReader{uc: uc}
	return &Conn{uc: uc, fdr: fdr, br: bufio.NewReaderSize(fdr, 64<<10)}
}

// Send writes f with fds attached to its first bytes. The caller keeps ownership of fds.
func (c *Conn) Send(f *Frame, fds ...int) error {
	if len(fds) > MaxFDsPerFrame {
		return fmt.Errorf("frame %d: %d descriptors, at most %d", f.ID, len(fds), MaxFDsPerFrame)
	}
	f.FDs = len(fds)
	b, err := encodeFrame(f)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(fds) == 0 {
		_, err = c.uc.Write(b)
		return err
	}
	// The descriptors ride on the first sendmsg. On a stream socket it may send only part of
	// the bytes; the rest follow as ordinary data (the receiver's queue keeps the order).
	n, _, err := c.uc.WriteMsgUnix(b, syscall.UnixRights(fds...), nil)
	if err != nil {
		return err
	}
	if n < len(b) {
		_, err = c.uc.Write(b[n:])
	}
	return err
}

// Receive reads the next frame and the raw descriptors sent with it, which the caller then owns
// (they are close-on-exec).
func (c *Conn) Receive() (*Frame, []int, error) {
	f, err := readFrame(c.br, MaxFrameSize)
	if err != nil {
		// The connection is done: descriptors received but never claimed are nobody's.
		for _, fd := range c.fdr.queue {
			syscall.Close(fd)
		}
		c.fdr.queue = nil
		return nil, nil, err
	}
	if f.FDs == 0 {
		return f, nil, nil
	}
	// All of the frame's bytes have been read, and its descriptors came with its first
	// bytes, so they are in the queue now, after those of earlier frames.
	if len(c.fdr.queue) < f.FDs {
		return nil, nil, fmt.Errorf("frame %d claims %d descriptors, %d received", f.ID, f.FDs, len(c.fdr.queue))
	}
	fds := append([]int(nil), c.fdr.queue[:f.FDs]...)
	c.fdr.queue = c.fdr.queue[f.FDs:]
	return f, fds, nil
}

// Close closes the socket; a Receive under way then fails (and closes the descriptors received
// but not claimed by a frame). It may be called more than once, from any goroutine.
func (c *Conn) Close() error {
	return c.uc.Close()
}

// CloseWrite half-closes the socket, so the peer reads EOF.
func (c *Conn) CloseWrite() error { return c.uc.CloseWrite() }

// fdReader reads bytes with recvmsg and queues the descriptors that arrive with them.
type fdReader struct {
	uc    *net.UnixConn
	oob   [512]byte
	queue []int
}

func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob[:])
	if n < 0 {
		n = 0
	}
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(r.oob[:oobn])
		if perr != nil {
			return n, fmt.Errorf("parse control message: %w", perr)
		}
		for _, m := range msgs {
			fds, perr := syscall.ParseUnixRights(&m)
			if perr != nil {
				continue // not SCM_RIGHTS (credentials are not sent)
			}
			r.queue = append(r.queue, fds...)
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 && err == nil {
		err = errors.New("descriptors were truncated in transit (MSG_CTRUNC)")
	}
	return n, err
}
