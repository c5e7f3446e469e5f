package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// methodAttachStdio is the first frame of a stdio connection (hack/wine/README.md).
const methodAttachStdio = "AttachStdio"

// attachTimeout is how long a reply's streams wait for their connections before they are
// closed, so that a client that never attaches does not hold a process's pipes forever.
const attachTimeout = 30 * time.Second

type attachArgs struct {
	Token string `json:"token"`
	Slot  int    `json:"slot"`
}

type bridge struct {
	hcsemu string

	mu      sync.Mutex
	streams map[string]*os.File // by token/slot
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9345", "loopback TCP address to serve (port 0: any free port)")
	addrFile := flag.String("address-file", "", "write the address served to this file once listening")
	addr := os.Getenv("HCSEMU_ADDRESS")
	if addr == "" {
		addr = computecore.DefaultAddress
	}
	hcsemu := flag.String("hcsemu", addr, "hcsemu's unix socket")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *hcsemu, *addrFile); err != nil {
		fmt.Fprintln(os.Stderr, "hcsemutcp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, hcsemu, addrFile string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	// The protocol has no authentication, like hcsemu's unix socket (whose permissions guard
	// it): serve loopback only.
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: not a loopback address", listen)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	if addrFile != "" {
		tmp := addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(l.Addr().String()), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, addrFile); err != nil {
			return err
		}
	}
	b := &bridge{hcsemu: hcsemu, streams: map[string]*os.File{}}
	log.G(ctx).WithField("listen", l.Addr().String()).WithField("hcsemu", hcsemu).Info("hcsemutcp: serving")
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go b.serve(ctx, c)
	}
}

func readFrame(r io.Reader) (*wire.Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > wire.MaxFrameSize {
		return nil, fmt.Errorf("frame of %d bytes is more than %d", n, wire.MaxFrameSize)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	var f wire.Frame
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("decode frame: %w", err)
	}
	return &f, nil
}

func writeFrame(w io.Writer, f *wire.Frame) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	_, err = w.Write(b)
	return err
}

// serve handles one TCP connection: a stdio stream if its first frame is AttachStdio, else a
// client's control connection.
func (b *bridge) serve(ctx context.Context, c net.Conn) {
	r := bufio.NewReader(c)
	first, err := readFrame(r)
	if err != nil {
		_ = c.Close()
		return
	}
	if first.Method == methodAttachStdio {
		b.attach(ctx, c, r, first)
		return
	}
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: b.hcsemu, Net: "unix"})
	if err != nil {
		log.G(ctx).WithError(err).WithField("hcsemu", b.hcsemu).Error("hcsemutcp: the HCS emulator is not running")
		_ = c.Close()
		return
	}
	wc := wire.NewConn(uc)
	defer wc.Close()
	defer c.Close()

	// Client -> hcsemu: frames unchanged (clients send no descriptors).
	go func() {
		defer wc.Close()
		f := first
		for {
			if err := wc.Send(f); err != nil {
				return
			}
			var err error
			if f, err = readFrame(r); err != nil {
				return
			}
		}
	}()
	// hcsemu -> client: descriptors become a stdio token.
	for {
		f, fds, err := wc.Receive()
		if err != nil {
			return
		}
		if len(fds) > 0 {
			if err := b.keepStdio(ctx, f, fds); err != nil {
				log.G(ctx).WithError(err).WithField("request", f.ID).Error("hcsemutcp: stdio of a reply")
			}
		}
		if err := writeFrame(c, f); err != nil {
			return
		}
	}
}

// keepStdio takes a reply's descriptors into the stream table under a new token and rewrites
// the reply: the token added, no descriptors. Slots follow wire.ProcessReply: descriptors in
// slot order, or one pseudo console master for stdin and stdout.
func (b *bridge) keepStdio(ctx context.Context, f *wire.Frame, fds []int) error {
	var pr wire.ProcessReply
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(f.Reply, &pr); err != nil {
		closeAll(fds)
		return fmt.Errorf("reply with %d descriptors is not a process reply: %w", len(fds), err)
	}
	if err := json.Unmarshal(f.Reply, &fields); err != nil {
		closeAll(fds)
		return err
	}
	var slots [3]int
	for i := range slots {
		slots[i] = -1
	}
	if pr.Console {
		d, err := unix.FcntlInt(uintptr(fds[0]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeAll(fds)
			return fmt.Errorf("duplicate the console of process %d: %w", pr.PID, err)
		}
		slots[wire.StdIn], slots[wire.StdOut] = fds[0], d
		closeAll(fds[1:])
	} else {
		i := 0
		for s, ok := range pr.Stdio {
			if ok && i < len(fds) {
				slots[s] = fds[i]
				i++
			}
		}
		closeAll(fds[i:])
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	b.mu.Lock()
	for s, fd := range slots {
		if fd >= 0 {
			b.streams[fmt.Sprintf("%s/%d", token, s)] = os.NewFile(uintptr(fd), fmt.Sprintf("process %d slot %d", pr.PID, s))
		}
	}
	b.mu.Unlock()
	time.AfterFunc(attachTimeout, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for s := range slots {
			k := fmt.Sprintf("%s/%d", token, s)
			if f, ok := b.streams[k]; ok {
				log.G(ctx).WithField("pid", pr.PID).WithField("slot", s).Warn("hcsemutcp: stdio never attached; closed")
				_ = f.Close()
				delete(b.streams, k)
			}
		}
	})
	tok, _ := json.Marshal(token)
	fields["stdioToken"] = tok
	reply, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	f.Reply = reply
	f.FDs = 0
	return nil
}

// attach relays one std stream between its TCP connection and the process's descriptor.
func (b *bridge) attach(ctx context.Context, c net.Conn, r *bufio.Reader, f *wire.Frame) {
	defer c.Close()
	var a attachArgs
	if err := f.DecodeArgs(&a); err != nil {
		log.G(ctx).WithError(err).Error("hcsemutcp: AttachStdio")
		return
	}
	k := fmt.Sprintf("%s/%d", a.Token, a.Slot)
	b.mu.Lock()
	file, ok := b.streams[k]
	delete(b.streams, k)
	b.mu.Unlock()
	if !ok {
		log.G(ctx).WithField("slot", a.Slot).Error("hcsemutcp: AttachStdio of an unknown or expired token")
		return
	}
	defer file.Close()
	var err error
	if a.Slot == wire.StdIn {
		_, err = io.Copy(file, r) // the client's half-close is the end of the process's input
	} else {
		_, err = io.Copy(c, file)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EIO) {
		// EIO: a pseudo console's master reads EIO once the process side is gone.
		log.G(ctx).WithError(err).WithField("slot", a.Slot).Debug("hcsemutcp: stream ended")
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}
